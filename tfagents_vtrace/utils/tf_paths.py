"""Paths that TensorFlow's readers take literally.

TensorFlow's checkpoint readers (``tf.train.Checkpoint.restore``, ``tf.saved_model.load``,
``tf.train.load_checkpoint``) treat a path as a glob pattern, so a run directory whose path
holds ``[``, ``]``, ``*`` or ``?`` cannot be read through its own name (writing works).
:class:`DirAlias` names such a directory through an open file descriptor
(``/proc/self/fd/<n>``), a name without pattern characters.
"""

from __future__ import annotations

import glob
import os


def has_glob_characters(path: str) -> bool:
    return glob.escape(path) != path


class DirAlias:
    """A name for directory ``path`` that TensorFlow's file functions read as a plain path:
    ``path`` itself, or ``/proc/self/fd/<n>`` of an open descriptor when ``path`` holds glob
    characters (``create``: the directory is made when missing). :meth:`close` releases the
    descriptor.

    Raises:
      ValueError: ``path`` holds glob characters on a system without ``/proc/self/fd``.
    """

    def __init__(self, path: str, create: bool = True):
        self.path, self._fd = path, None
        if not has_glob_characters(os.path.abspath(path)):
            self.name = path
            return
        if not os.path.isdir("/proc/self/fd"):
            raise ValueError(
                f"{path!r} holds one of the characters [ ] * ? that TensorFlow's readers "
                "take as a pattern; choose a path without them"
            )
        if create:
            os.makedirs(path, exist_ok=True)
        self._fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        self.name = f"/proc/self/fd/{self._fd}"

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *exc) -> None:
        self.close()


def load_saved_model(path: str | os.PathLike):
    """``tf.saved_model.load(path)``, for any directory name (:class:`DirAlias`)."""
    import tensorflow as tf

    with DirAlias(os.fspath(path), create=False) as name:
        return tf.saved_model.load(name)
