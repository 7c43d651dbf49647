"""Replay archives: numpy ``.npz`` files with a checksum, saved beside each checkpoint.

A replay buffer is a dict of arrays plus a small JSON-able ``meta`` dict (sizes, cursor,
counters). :func:`save_arrays` writes them as an uncompressed ``.npz`` (``allow_pickle`` is
never used, so loading executes nothing) with one extra member, ``__meta__``, holding the
meta dict and the SHA-256 of every array as JSON bytes. The file is written to a temporary
name and renamed, so a crash leaves either the old archive or the new one, never half of
one. :func:`load_arrays` re-hashes every array and raises :class:`ReplayCorruptError`
(naming the path and the member) when anything does not match, so a damaged archive is
reported instead of silently training on garbage.

Archives follow the checkpoints: ``DIR/checkpoints/replay-<env_step>.npz`` belongs to the
checkpoint numbered ``<env_step>`` (the runtime numbers checkpoints by environment steps).
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import zipfile

import numpy as np

_META_KEY = "__meta__"
_NAME_RE = re.compile(r"^replay-(\d+)\.npz$")
_TMP_RE = re.compile(r"^replay-\d+\.tmp\.npz$")  # what save_arrays writes before its rename


class ReplayCorruptError(ValueError):
    """A replay archive is unreadable, truncated or fails its checksum."""


def _digest(array: np.ndarray) -> str:
    array = np.ascontiguousarray(array)
    h = hashlib.sha256()
    h.update(str(array.dtype).encode())
    h.update(repr(array.shape).encode())
    h.update(array.tobytes())
    return h.hexdigest()


def save_arrays(path: str, arrays: dict[str, np.ndarray], meta: dict | None = None) -> None:
    """Writes ``arrays`` and ``meta`` atomically to the ``.npz`` file ``path``.

    Args:
      path: destination; its directory is created. Must end in ``.npz``.
      arrays: name -> array. Object arrays are refused (they would need pickle).
      meta: JSON-serialisable dict stored with the archive (returned by ``load_arrays``).

    Raises:
      ValueError: ``path`` does not end in .npz, a name is reserved, an array has dtype object
        or ``meta`` is not JSON-serialisable.
    """
    if not path.endswith(".npz"):
        raise ValueError(f"path: expected a name ending in .npz, received {path!r}")
    arrays = {name: np.asarray(value) for name, value in arrays.items()}
    for name, value in arrays.items():
        if name == _META_KEY:
            raise ValueError(f"arrays: the name {_META_KEY!r} is reserved")
        if value.dtype == object:
            raise ValueError(f"arrays[{name!r}]: dtype object cannot be saved without pickle")
    header = {
        "meta": dict(meta or {}),
        "sha256": {name: _digest(value) for name, value in arrays.items()},
    }
    try:
        blob = json.dumps(header, sort_keys=True).encode()
    except TypeError as err:
        raise ValueError(f"meta: expected a JSON-serialisable dict ({err})") from err
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path[: -len(".npz")] + ".tmp.npz"
    with open(tmp, "wb") as f:
        np.savez(f, **arrays, **{_META_KEY: np.frombuffer(blob, dtype=np.uint8)})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def load_arrays(path: str) -> tuple[dict[str, np.ndarray], dict]:
    """Reads an archive written by :func:`save_arrays`; returns ``(arrays, meta)``.

    Raises:
      FileNotFoundError: ``path`` does not exist.
      ReplayCorruptError: the file is not a readable archive, lacks its header, misses an
        array or an array's SHA-256 differs from the one saved.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"path: no replay archive at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            if _META_KEY not in names:
                raise ReplayCorruptError(f"replay archive {path!r}: no {_META_KEY} header")
            header = json.loads(data[_META_KEY].tobytes().decode())
            arrays = {name: data[name] for name in names if name != _META_KEY}
    except ReplayCorruptError:
        raise
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as err:
        raise ReplayCorruptError(f"replay archive {path!r} is unreadable: {err!r}") from err
    expected = header.get("sha256", {})
    if set(expected) != set(arrays):
        raise ReplayCorruptError(
            f"replay archive {path!r}: members {sorted(arrays)} differ from the header's "
            f"{sorted(expected)}"
        )
    for name, value in arrays.items():
        if _digest(value) != expected[name]:
            raise ReplayCorruptError(f"replay archive {path!r}: checksum mismatch in {name!r}")
    return arrays, header.get("meta", {})


def replay_path(logdir: str, step: int) -> str:
    """``DIR/checkpoints/replay-<step>.npz``: the archive saved with checkpoint ``step``."""
    return os.path.join(logdir, "checkpoints", f"replay-{int(step)}.npz")


def latest_replay_path(logdir: str, step: int) -> str | None:
    """The archive of checkpoint ``step`` if it exists, else None (resuming without one
    starts with an empty buffer; the caller should log it)."""
    path = replay_path(logdir, step)
    return path if os.path.exists(path) else None


def prune_replays(logdir: str, keep_steps) -> list[str]:
    """Deletes replay archives whose step is not in ``keep_steps`` (the checkpoints that
    ``CheckpointManager`` still keeps), and the temporary ``replay-<step>.tmp.npz`` files
    that a save killed before its rename left; returns the removed paths.

    Call it between saves (the runtime does, right after one), never while
    :func:`save_arrays` may be writing in the same directory.
    """
    keep = {int(s) for s in keep_steps}
    removed = []
    pattern = os.path.join(glob.escape(os.path.join(logdir, "checkpoints")), "replay-*.npz")
    for path in sorted(glob.glob(pattern)):
        match = _NAME_RE.search(os.path.basename(path))
        leftover = _TMP_RE.match(os.path.basename(path)) is not None
        if leftover or (match and int(match.group(1)) not in keep):
            os.remove(path)
            removed.append(path)
    return removed


__all__ = [
    "ReplayCorruptError",
    "latest_replay_path",
    "load_arrays",
    "prune_replays",
    "replay_path",
    "save_arrays",
]
