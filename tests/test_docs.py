"""Every ```python and ```bash block of README.md and docs/guide/*.md runs (short budgets).

A page's blocks run in order in one temporary directory (a block may use what an earlier one
wrote, e.g. evaluate after train), with ``examples/`` linked there and on PYTHONPATH, and the
venv's bin directory first on PATH. ``total_steps=<N>`` becomes 3000 and ``episodes=<N>`` 2.
Blocks tagged otherwise (```console, ```text) are not run: install commands, ``make train`` /
``make test`` (they would recurse), output samples, cluster commands.
``make test`` runs the page a new user starts with (:data:`QUICK_START`, the README: its own
environment from Python and the command line, the exported policy in plain TensorFlow);
``make test-long`` runs the guides' blocks (marked ``long``: each launches TensorFlow
processes, several minutes in all, and every feature they show has its own tests in
``make test``).
"""

import concurrent.futures
import fcntl
import json
import os
import re
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")
GUIDE = os.path.join(ROOT, "docs", "guide")
PAGES = ["README.md"] + sorted(
    os.path.join("docs", "guide", n) for n in os.listdir(GUIDE) if n.endswith(".md")
)
QUICK_START = ("README.md",)
RESULTS = sorted(
    os.path.join("docs", "results", n)
    for n in os.listdir(os.path.join(ROOT, "docs", "results"))
    if n.endswith(".md")
)
# docs/*.md: the design, the defaults and the reference map (their blocks are not run).
OTHER_DOCS = sorted(
    os.path.join("docs", n) for n in os.listdir(os.path.join(ROOT, "docs")) if n.endswith(".md")
)
RUN_TAGS = ("python", "bash")
FENCE = re.compile(r"^```(\S*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
TOTAL_STEPS = 3000
EPISODES = 2
TIMEOUT_S = 300
PARALLEL_PAGES = 3  # subprocesses mostly import TensorFlow and wait: 3 fit 2 cores


def _read(page: str) -> str:
    with open(os.path.join(ROOT, page)) as f:
        return f.read()


def blocks(text: str) -> list[tuple[str, str]]:
    """``(tag, code)`` of the fenced blocks of ``text`` that run, in order."""
    out = []
    for tag, code in FENCE.findall(text):
        if tag not in RUN_TAGS or re.search(r"^\s*make (train|test)\b", code, re.M):
            continue
        out.append((tag, shorten(code)))
    return out


def shorten(code: str) -> str:
    """``code`` with the training budgets and episode counts made small."""
    code = re.sub(r"\b(total_steps=)[\d_]+", rf"\g<1>{TOTAL_STEPS}", code)
    return re.sub(r"\b(episodes=)\d+", rf"\g<1>{EPISODES}", code)


def test_shorten_rewrites_budgets():
    code = "tv.train(total_steps=100_000)\ntfv-train --total_steps=100000 --episodes=10"
    assert shorten(code) == "tv.train(total_steps=3000)\ntfv-train --total_steps=3000 --episodes=2"
    assert shorten("--eval_episodes=10") == "--eval_episodes=10"


def test_the_quick_start_pages_exist():
    assert set(QUICK_START) <= set(PAGES)


def test_readme_is_short_and_keeps_the_quick_start():
    text = _read("README.md")
    assert len(text.splitlines()) <= 150
    assert "make train" in text and "make test" in text


@pytest.mark.parametrize("page", PAGES + RESULTS + OTHER_DOCS)
def test_links_resolve(page):
    folder = os.path.dirname(os.path.join(ROOT, page))
    for target in re.findall(r"\]\(([^)#\s]+)[^)]*\)", _read(page)):
        if "://" not in target:
            assert os.path.exists(os.path.join(folder, target)), f"{page}: {target}"


def run_page(page: str, workdir: str) -> str | None:
    """Runs ``page``'s blocks in order in ``workdir``; the first failure's report, or None."""
    os.symlink(EXAMPLES, os.path.join(workdir, "examples"))
    pythonpath = [EXAMPLES] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "PYTHONPATH": os.pathsep.join(pythonpath),
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
    }
    for i, (tag, code) in enumerate(blocks(_read(page))):
        args = [sys.executable, "-c", code] if tag == "python" else ["bash", "-e", "-c", code]
        start = time.monotonic()
        try:
            done = subprocess.run(
                args, cwd=workdir, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"{page}, block {i + 1} ({tag}): timed out after {TIMEOUT_S} s\n{code}"
        if done.returncode != 0:
            return (
                f"{page}, block {i + 1} ({tag}), exit code {done.returncode} after "
                f"{time.monotonic() - start:.0f} s:\n{code}\n--- stdout\n{done.stdout[-2000:]}"
                f"\n--- stderr\n{done.stderr[-3000:]}"
            )
    return None


def _run_pages(pages: list[str], tmp_path_factory) -> dict:
    dirs = {page: str(tmp_path_factory.mktemp(os.path.basename(page)[:-3])) for page in pages}
    with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_PAGES) as pool:
        futures = {page: pool.submit(run_page, page, dirs[page]) for page in pages}
        return {page: future.result() for page, future in futures.items()}


@pytest.fixture(scope="session")
def page_failures(request, tmp_path_factory):
    """The selected pages' blocks, pages side by side (each page's in order): page -> the
    first failure's report, or None. Run once per test session: under xdist the first worker
    to get here runs them, holding a lock in the workers' shared temporary directory, and
    leaves the reports there for the others."""
    pages = [
        item.callspec.params["page"]
        for item in request.session.items
        if item.originalname == "test_code_blocks_run"
    ]
    if not hasattr(request.config, "workerinput"):  # no xdist
        return _run_pages(pages, tmp_path_factory)
    shared = tmp_path_factory.getbasetemp().parent
    reports = shared / "docs_pages.json"
    with open(shared / "docs_pages.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if reports.is_file():
            return json.loads(reports.read_text())
        out = _run_pages(pages, tmp_path_factory)
        reports.write_text(json.dumps(out))
        return out


@pytest.mark.xdist_group("docs")
def test_loadgroup_keeps_a_group_on_one_worker(request):
    """Under make test's ``--dist loadgroup`` a grouped test's id carries its group, which is
    how xdist keeps the group on one worker (pytest 9.2 broke that: pytest-xdist#1386); the
    docs pages, the Ray cluster tests and others rely on it."""
    if request.config.getvalue("dist") == "loadgroup":
        assert request.node.nodeid.endswith("@docs"), request.node.nodeid


@pytest.mark.xdist_group("docs")  # make test's --dist loadgroup: the pages on one worker
@pytest.mark.parametrize(
    "page", [p if p in QUICK_START else pytest.param(p, marks=pytest.mark.long) for p in PAGES]
)
def test_code_blocks_run(page, page_failures):
    if not blocks(_read(page)):
        pytest.skip(f"{page} has no block to run")
    assert page_failures[page] is None, page_failures[page]
