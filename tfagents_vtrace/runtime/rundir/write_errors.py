"""Failures to write a run's files (disk full, read-only directory, permission denied) as one
error naming the file and what was being written, instead of a traceback from deep inside
TensorFlow or the file system."""

from __future__ import annotations

import contextlib


class WriteError(RuntimeError):
    """A run's file could not be written; ``what`` names the kind of file (``"checkpoint"``,
    ``"metrics"``, ``"policy"``, ...)."""

    def __init__(self, what: str, path: str, reason: str):
        self.what, self.path = what, path
        super().__init__(f"could not write the {what} {path!r}: {reason}")


def _reason(error: BaseException) -> str:
    strerror = getattr(error, "strerror", None)
    if isinstance(error, OSError) and strerror:
        return strerror
    text = str(getattr(error, "message", None) or error).strip().splitlines()
    last = text[0] if text else type(error).__name__
    return last.rsplit("; ", 1)[-1][:200]  # TensorFlow's "path; No space left on device"


@contextlib.contextmanager
def writing(what: str, path: str):
    """Turns an ``OSError`` or a TensorFlow I/O error raised inside into :class:`WriteError`."""
    try:
        yield
    except WriteError:
        raise
    except OSError as e:
        raise WriteError(what, path, _reason(e)) from e
    except Exception as e:
        import sys

        tf = sys.modules.get("tensorflow")
        if tf is not None and isinstance(e, tf.errors.OpError):
            raise WriteError(what, path, _reason(e)) from e
        raise
