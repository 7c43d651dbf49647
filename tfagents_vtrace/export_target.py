"""Where a policy SavedModel goes: checked first, written beside, renamed into place.

Export never deletes what it did not write (DESIGN.md, "Experiments contract"):

* :func:`check_export_path` refuses a ``path`` that is a file, a symbolic link, or a non-empty
  directory without ``saved_model.pb``, whatever ``overwrite`` says; an existing SavedModel is
  replaced only with ``overwrite=True``. So ``--output=. --overwrite`` cannot remove the
  working directory.
* :func:`write_atomically` writes the new SavedModel to a fresh sibling directory
  (``PATH.tmp-<pid>-<random>``, same file system), renames the old one aside, renames the new
  one into place and only then removes the old one. A save that fails removes its own
  temporary directory and leaves the previous policy untouched.

No TensorFlow import: ``experiments.export`` checks its ``--output`` before TensorFlow loads.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable

SAVED_MODEL_FILE = "saved_model.pb"


def check_export_path(path: str | os.PathLike, overwrite: bool, name: str = "path") -> bool:
    """Checks that a SavedModel may be written at ``path``; returns whether one will be
    replaced (``path`` is an existing directory).

    Args:
      path: the export directory.
      overwrite: allow replacing an existing SavedModel.
      name: the argument named in errors (e.g. ``"output"`` for a flag).

    Raises:
      ValueError: ``"{name}: ..."`` when ``path`` is a symbolic link or a file, a non-empty
        directory that is not a SavedModel (no ``saved_model.pb``; even with ``overwrite``),
        or a SavedModel and ``overwrite`` is False.
    """
    path = os.fspath(path)
    if os.path.islink(path):
        raise ValueError(f"{name}: {path} is a symbolic link; give the directory itself")
    if not os.path.exists(path):
        return False
    if not os.path.isdir(path):
        raise ValueError(
            f"{name}: {path} is a file, not a SavedModel directory; refusing to replace it"
        )
    if not os.listdir(path):
        return True
    if not os.path.isfile(os.path.join(path, SAVED_MODEL_FILE)):
        raise ValueError(
            f"{name}: {path} is a non-empty directory that is not a SavedModel (no "
            f"{SAVED_MODEL_FILE}); refusing to replace it, even with overwrite"
        )
    if not overwrite:
        raise ValueError(
            f"{name}: {path} exists and is not empty; pass overwrite=True to replace it "
            "(--overwrite with python -m experiments.export)"
        )
    return True


def write_atomically(
    path: str | os.PathLike, write: Callable[[str], None], *, overwrite: bool = False
) -> str:
    """Runs ``write(tmp)`` on a new sibling directory of ``path``, then renames it to ``path``.

    Args:
      path: the export directory (checked with :func:`check_export_path`).
      write: writes the SavedModel into the (existing, empty) directory it is given.
      overwrite: replace an existing SavedModel at ``path``.

    Returns:
      ``path`` as a string.

    Raises:
      ValueError: from :func:`check_export_path`. Whatever ``write`` raises propagates after
        its temporary directory is removed; ``path`` is then as it was.
    """
    path = os.fspath(path)
    replace = check_export_path(path, overwrite)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(os.path.abspath(path))
    tmp = tempfile.mkdtemp(prefix=f"{base}.tmp-{os.getpid()}-", dir=parent)
    try:
        write(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if not replace:
        os.rename(tmp, path)
        return path
    old = tempfile.mkdtemp(prefix=f"{base}.old-{os.getpid()}-", dir=parent)
    os.rename(path, old)  # onto an empty directory: allowed by rename(2)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
    return path
