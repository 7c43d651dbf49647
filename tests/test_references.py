"""What the project cites is in the repository, or a public URL or paper.

Docstrings, comments, configs and docs point to files of the repository (``docs/design.md``
and its sections, ``docs/results/``, the guide), to public URLs, or to papers (title, authors,
year, arXiv), never to a design document, platform notes or reference texts kept outside the
repository, which a reader of a clone cannot open. A section of the design named in a
citation of the form ``(docs/design.md, "Section")`` is a heading of that file.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("tfagents_vtrace", "tests", "benchmarks", "experiments", "examples", "docs")
TOP_FILES = ("README.md", "BUILD.md", "Makefile", "setup.cfg", "pyproject.toml")
SUFFIXES = (".py", ".md", ".cfg", ".toml", ".txt")
# Files outside the repository that older text cited (split so that this file does not match).
OUTSIDE = re.compile(
    r"\b(?:DESIGN|PLATFORM|STYLE)" r"\.md\b|\breference/\w+\.txt\b|\.\./shared" r"/"
)
DESIGN_SECTION = re.compile(r"docs/design\.md,\s+\"([^\"]+)\"")


def _files() -> list[str]:
    paths = [os.path.join(ROOT, name) for name in TOP_FILES]
    for folder in FOLDERS:
        for parent, dirs, names in os.walk(os.path.join(ROOT, folder)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            paths += [os.path.join(parent, n) for n in names if n.endswith(SUFFIXES)]
    return sorted(p for p in paths if os.path.isfile(p) and not os.path.islink(p))


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def test_nothing_outside_the_repository_is_cited():
    found = [
        f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()}"
        for path in _files()
        for number, line in enumerate(_read(path).splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert not found, "files outside the repository cited:\n" + "\n".join(found)


def test_design_sections_cited_exist():
    headings = set()  # "The run agent" for "### The run agent (`runtime/run_agent.py`)"
    for line in _read(os.path.join(ROOT, "docs", "design.md")).splitlines():
        if line.startswith("#"):
            heading = line.lstrip("#").replace("`", "").strip()
            headings |= {heading, re.sub(r"\s*\(.*\)$", "", heading)}
    missing = [
        f"{os.path.relpath(path, ROOT)}: {section!r}"
        for path in _files()
        if path != os.path.abspath(__file__)
        for section in (" ".join(s.split()) for s in DESIGN_SECTION.findall(_read(path)))
        if section.replace("`", "") not in headings
    ]
    assert not missing, f"sections not in docs/design.md ({sorted(headings)}):\n" + "\n".join(
        missing
    )
