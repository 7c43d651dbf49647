"""Renamed settings: their old names are still read, with a one-line warning, wherever a
name is read (the command line, a flagfile, the Python API's keywords, a run directory's
``config.json``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

DEPRECATED_NAMES = {
    "entropy_start": "entropy_cost",
    "entropy_end": "entropy_cost_end",
}
"""Old setting names -> their names now (one entropy schedule for every agent: A2C and A3C
had ``entropy_start`` / ``entropy_end``). Read with a warning for this release."""
_WARNED: set[str] = set()


def check_deprecated(names: Iterable[str], dashes: str = "", where: str = "") -> None:
    """Prints ``warning: {dashes}OLD is deprecated; use {dashes}NEW{where}`` on stderr for each
    deprecated name among ``names`` (once per name and process).

    Raises:
      ValueError: ``"OLD: ..."`` when ``names`` holds an old name and its new one together.
    """
    names = list(dict.fromkeys(names))  # in order, once each
    old_names = [name for name in names if name in DEPRECATED_NAMES]
    for old in old_names:
        new = DEPRECATED_NAMES[old]
        if new in names:
            raise ValueError(
                f"{old}: deprecated name of {dashes}{new}, which is also given{where}; keep "
                f"{dashes}{new} only"
            )
    for old in old_names:
        if old not in _WARNED:
            _WARNED.add(old)
            new = DEPRECATED_NAMES[old]
            print(
                f"warning: {dashes}{old} is deprecated; use {dashes}{new}{where}",
                file=sys.stderr,
                flush=True,
            )


def rename_deprecated(settings: dict[str, Any], dashes: str = "", where: str = "") -> dict:
    """``settings`` with each deprecated name replaced by its name now (see
    :func:`check_deprecated`, which warns and raises)."""
    check_deprecated(settings, dashes, where)
    return {DEPRECATED_NAMES.get(name, name): value for name, value in settings.items()}
