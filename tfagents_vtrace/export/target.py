"""The export formats, and where an artefact goes: checked first, written beside, renamed.

:data:`FORMATS` is the one list of formats a policy is exported to (``tfv-export --format``
and :func:`tfagents_vtrace.export.artefacts.write` read it): a SavedModel directory, a LiteRT
(TFLite) file, an ONNX file. Export never deletes what it did not write:

* :func:`check_export_path` refuses a ``path`` that is a file, a symbolic link, or a non-empty
  directory without ``saved_model.pb``, whatever ``overwrite`` says; an existing SavedModel is
  replaced only with ``overwrite=True``. So ``--output=. --overwrite`` cannot remove the
  working directory.
* :func:`write_atomically` writes the new SavedModel to a fresh sibling directory
  (``PATH.tmp-<pid>-<random>``, same file system), renames the old one aside, renames the new
  one into place and only then removes the old one. A save that fails removes its own
  temporary directory and leaves the previous policy untouched.

Single-file artefacts (a LiteRT ``.tflite`` model, an ONNX model) follow the same rules with
:func:`check_export_file` and :func:`write_file_atomically`: only a file that is already a
model of that format is replaced (with ``overwrite``), the bytes go to a temporary sibling file
first and ``os.replace`` puts them into place. :func:`check_target` picks the check of a format.

No TensorFlow import: ``tfv-export`` checks its ``--format`` and ``--output`` before
TensorFlow loads.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable

SAVED_MODEL_FILE = "saved_model.pb"


@dataclasses.dataclass(frozen=True)
class Format:
    """One export format.

    Attributes:
      what: the artefact, as errors name it.
      default_name: its name in a run directory (``tfv-export`` without ``--output``).
      is_model: for a one-file format, whether the first 64 bytes of a file are those of a
        model of it (only such a file is replaced); None for a directory (SavedModel).
      write_modules: the modules that write it; run_modules: those that run it (the parity
        check); extra: the package extra that installs both (None: TensorFlow alone).
    """

    what: str
    default_name: str
    is_model: Callable[[bytes], bool] | None = None
    write_modules: tuple[str, ...] = ()
    run_modules: tuple[str, ...] = ()
    extra: str | None = None

    @property
    def is_file(self) -> bool:
        """One file (LiteRT, ONNX), not a directory (SavedModel)."""
        return self.is_model is not None


# A LiteRT flatbuffer carries the file identifier TFL3 at bytes 4-8; an ONNX ModelProto
# written by tf2onnx starts with field 1 (ir_version, tag 0x08) and names tf2onnx as its
# producer (field 2) right after it.
FORMATS = {
    "saved_model": Format("SavedModel", "policy"),
    "tflite": Format(
        "LiteRT (TFLite) model",
        "policy.tflite",
        is_model=lambda head: head[4:8] == b"TFL3",
        run_modules=("ai_edge_litert",),
        extra="litert",
    ),
    "onnx": Format(
        "ONNX model written by tf2onnx",
        "policy.onnx",
        is_model=lambda head: head[:1] == b"\x08" and b"tf2onnx" in head,
        write_modules=("tf2onnx",),
        run_modules=("onnxruntime",),
        extra="onnx",
    ),
}


def check_format(fmt: str) -> Format:
    """The :class:`Format` named ``fmt``.

    Raises:
      ValueError: ``fmt`` is not a key of :data:`FORMATS`.
    """
    if fmt not in FORMATS:
        raise ValueError(f"fmt: expected one of {', '.join(FORMATS)}, received {fmt!r}")
    return FORMATS[fmt]


def check_target(path: str | os.PathLike, fmt: str, overwrite: bool, name: str = "path") -> bool:
    """:func:`check_export_path` for a SavedModel, :func:`check_export_file` for a file."""
    if check_format(fmt).is_file:
        return check_export_file(path, fmt, overwrite, name)
    return check_export_path(path, overwrite, name)


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
            "(--overwrite with tfv-export)"
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


def check_export_file(
    path: str | os.PathLike, fmt: str, overwrite: bool, name: str = "path"
) -> bool:
    """Checks that a ``fmt`` model file may be written at ``path``; returns whether one will
    be replaced.

    Raises:
      ValueError: ``"{name}: ..."`` when ``path`` is a symbolic link or a directory, a
        non-empty file that is not a model of ``fmt`` (even with ``overwrite``), or such a
        model and ``overwrite`` is False. An empty file is replaced like an empty directory.
    """
    path = os.fspath(path)
    what = FORMATS[fmt].what
    if os.path.islink(path):
        raise ValueError(f"{name}: {path} is a symbolic link; give the file itself")
    if not os.path.exists(path):
        return False
    if os.path.isdir(path):
        raise ValueError(f"{name}: {path} is a directory; a {what} is one file")
    if os.path.getsize(path) == 0:  # an empty file (e.g. from mktemp), as an empty directory
        return True
    with open(path, "rb") as f:
        head = f.read(64)
    if not FORMATS[fmt].is_model(head):
        raise ValueError(
            f"{name}: {path} is a file that is not a {what}; refusing to replace it, even with "
            "overwrite"
        )
    if not overwrite:
        raise ValueError(
            f"{name}: {path} exists; pass overwrite=True to replace it "
            "(--overwrite with tfv-export)"
        )
    return True


def write_file_atomically(
    path: str | os.PathLike, data: bytes, fmt: str, *, overwrite: bool = False
) -> str:
    """Writes ``data`` to a temporary sibling of ``path`` and renames it into place.

    Args:
      path: the model file (checked with :func:`check_export_file`).
      data: the serialized model.
      fmt: "tflite" or "onnx".
      overwrite: replace an existing model of ``fmt`` at ``path``.

    Returns:
      ``path`` as a string.
    """
    path = os.fspath(path)
    check_export_file(path, fmt, overwrite)
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    base = os.path.basename(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f"{base}.tmp-{os.getpid()}-", dir=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
