"""An exclusive lock on a run directory, held by its trainer for the process's lifetime.

Two trainers in one ``--logdir`` would truncate each other's metrics and event files and
overwrite each other's checkpoints, so ``tfv-train`` takes :class:`RunLock` before it
checks or writes anything in the directory (in a multi-worker cluster only the chief, which
is the only process writing there). The lock is ``fcntl.flock`` on ``DIR/.lock``, taken
without waiting; the file holds the holder's pid, which a refused trainer names. The kernel
releases the lock when the process ends, however it ends, so a run killed with SIGKILL can be
resumed at once; the file itself stays (only a trainer that fails before it writes anything
removes the file, and the directory, that it created). ``flock`` is advisory and per host: it
does not guard against processes on other machines writing through a network file system.

No TensorFlow import.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time

LOCK_NAME = ".lock"


class RunDirLockedError(ValueError):
    """Another live process holds the run directory's lock; ``pid`` is its pid (or None)."""

    def __init__(self, logdir: str, pid: int | None):
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"logdir: {logdir!r} is in use by another trainer ({holder}); wait for it to end, "
            "stop it, or choose another logdir"
        )
        self.pid = pid


def _read_pid(fd: int) -> int | None:
    """The pid written in the lock file (the holder writes it just after locking)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text.isdigit():
            return int(text)
        time.sleep(0.01)
    return None


class RunLock:
    """``fcntl.flock`` on ``logdir/.lock`` (see the module docstring).

    ``RunLock(logdir).acquire()`` creates ``logdir`` when needed, locks and returns the lock;
    :meth:`release` (or leaving a ``with`` block, or the process ending) unlocks.

    Raises (``acquire``):
      RunDirLockedError: (a ValueError) another process holds the lock; names its pid.
      ValueError: ``logdir`` exists and is not a directory.
    """

    def __init__(self, logdir: str):
        self.logdir = os.fspath(logdir)
        self.path = os.path.join(self.logdir, LOCK_NAME)
        self._fd: int | None = None
        self._created = self._created_dir = False

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        if self._fd is not None:
            return self
        if os.path.exists(self.logdir) and not os.path.isdir(self.logdir):
            raise ValueError(f"logdir: {self.logdir!r} exists and is not a directory")
        if not os.path.isdir(self.logdir):
            os.makedirs(self.logdir, exist_ok=True)
            self._created_dir = True
        while True:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise
                pid = _read_pid(fd)
                os.close(fd)
                self._created = False
                raise RunDirLockedError(self.logdir, pid) from None
            if self._same_file(fd):
                break
            os.close(fd)  # a holder discarded the file meanwhile: lock the current one
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def _open(self) -> int:
        flags = os.O_RDWR | os.O_NOFOLLOW  # a planted symlink is not followed
        try:
            fd = os.open(self.path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            self._created = True
            return fd
        except FileExistsError:
            pass
        try:
            return os.open(self.path, flags)
        except FileNotFoundError:  # discarded between the two calls
            return self._open()
        except OSError as e:
            if e.errno != errno.ELOOP:
                raise
            raise ValueError(f"logdir: {self.path!r} is a symbolic link") from None

    def _same_file(self, fd: int) -> bool:
        """Whether ``fd`` is still the file at ``self.path`` (not one unlinked meanwhile)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
        except FileNotFoundError:
            return False
        fst = os.fstat(fd)
        return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)

    def release(self, *, discard: bool = False) -> None:
        """Unlocks. ``discard=True`` also removes the lock file if this lock created it, and
        ``logdir`` if this lock created it and it is empty (a trainer that is refused, or
        fails before it writes anything, leaves nothing behind). Another process waiting on
        a discarded file notices and locks the new one (``acquire`` checks the inode)."""
        if self._fd is None:
            return
        if discard and self._created:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        os.close(self._fd)
        self._fd = None
        if discard and self._created_dir:
            with contextlib.suppress(OSError):  # not empty: something else was written
                os.rmdir(self.logdir)

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


__all__ = ["LOCK_NAME", "RunDirLockedError", "RunLock"]
