"""The project's one flagfile reader: the commands, the Python API and the benchmarks read
flagfiles through it (absl is handed the expanded command line and never opens one itself).

A flagfile holds one flag a line, ``--name=value`` (or ``--name`` / ``--noname`` for a
boolean), as absl reads them (https://abseil.io/docs/python/guides/flags): each line is
stripped, blank lines and lines starting with ``#`` or ``//`` are skipped, and a
``--flagfile=PATH`` line is replaced where it stands by that file's lines, so that the flags
after it override it. A relative nested ``PATH`` is looked up beside the file that names it
first and, if no file is there, as written (from the current folder, absl's rule); ``~`` is
expanded. A file that includes itself, directly or through others, is refused.

Plain Python, no absl, no TensorFlow: the benchmarks read flagfiles before (or without)
importing either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

FLAGFILE_ARGS = ("--flagfile", "-flagfile")
"""The two spellings of the flagfile flag."""


class FlagfileError(ValueError):
    """A flagfile that cannot be read; ``str(error)`` names no flag (``cannot open 'x.cfg':
    No such file or directory``): the caller prefixes its own (``--flagfile: ...``)."""


def _directive(line: str) -> str | None:
    """The PATH of a ``--flagfile=PATH`` / ``-flagfile=PATH`` line, else None."""
    for name in FLAGFILE_ARGS:
        if line.startswith(name + "="):
            return line[len(name) + 1 :]
    return None


def _nested(path: str, parent: str) -> str:
    """Where a ``--flagfile=path`` line of file ``parent`` points: beside ``parent`` when
    a file is there, else ``path`` as written (from the current folder)."""
    path = os.path.expanduser(path)
    beside = os.path.join(os.path.dirname(parent), path)
    return beside if os.path.exists(beside) else path


def _read(path: str, chain: tuple[tuple[str, str], ...]) -> list[str]:
    """:func:`flagfile_lines` of ``path``; ``chain``: ``(name, real path)`` of the files
    that include it, outermost first."""
    real = os.path.realpath(path)
    for name, seen in chain:
        if seen == real:
            names = " -> ".join([*(n for n, _ in chain), path])
            raise FlagfileError(f"{name!r} includes itself ({names})")
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        filename = path if e.filename is None else e.filename
        raise FlagfileError(f"cannot open {filename!r}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise FlagfileError(f"cannot read {path!r}: not a text file") from None
    chain = (*chain, (path, real))
    out: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", "//")):
            continue
        nested = _directive(line)
        if nested is None:
            out.append(line)
        elif nested:  # absl ignores an empty --flagfile=
            out += _read(_nested(nested, path), chain)
    return out


def flagfile_lines(path: str | os.PathLike) -> list[str]:
    """The flag lines of flagfile ``path``, stripped, in order, nested flagfiles read in
    place (see the module's docstring).

    Raises:
      FlagfileError: a file that cannot be opened (``cannot open 'PATH': <reason>``), or
        one that includes itself (``'a.cfg' includes itself (a.cfg -> b.cfg -> a.cfg)``).
    """
    return _read(os.path.expanduser(os.fspath(path)), ())


def expand_flagfiles(args: Sequence[str]) -> list[str]:
    """``args`` (a command line without the program's name) with each ``--flagfile=PATH``,
    ``-flagfile=PATH`` and ``--flagfile PATH`` / ``-flagfile PATH`` pair replaced where it
    stands by :func:`flagfile_lines` of ``PATH``; everything from a ``--`` on is left as it is.

    Raises:
      FlagfileError: as :func:`flagfile_lines`, or ``missing value`` for a ``--flagfile``
        with nothing after it.
    """
    out: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            out += [arg, *rest]
            break
        path = _directive(arg)
        if arg in FLAGFILE_ARGS:
            path = next(rest, None)
            if path is None:
                raise FlagfileError("missing value")
        if path is None:
            out.append(arg)
        elif path:  # absl ignores an empty --flagfile=
            out += flagfile_lines(path)
    return out


def flag_texts(lines: Iterable[str], known: Iterable[str] | None = None) -> dict[str, str]:
    """``{name: text}`` of flag ``lines`` (a later line wins): ``--name=value`` is
    ``value``, ``--name`` is ``"true"`` and ``--noname`` is ``name: "false"`` when ``name``
    is one of the ``known`` names and ``noname`` is not (with ``known`` None, any
    ``--noX``).

    Raises:
      FlagfileError: a line that is not a flag (``expected --name=value, received 'x'``).
    """
    known = None if known is None else set(known)
    out: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.lstrip("-").partition("=")
        if not line.startswith("-") or not name:
            raise FlagfileError(f"expected --name=value, received {line!r}")
        if not sep:
            value = "true"
            negated = name[2:] if name.startswith("no") else ""
            if known is None and negated:
                name, value = negated, "false"
            elif known is not None and negated in known and name not in known:
                name, value = negated, "false"
        out[name] = value
    return out
