"""The run-directory lock: one trainer per directory; a second is refused with one line naming
the holder's pid; a SIGKILLed holder's lock is gone, so the run can be resumed at once."""

import os
import subprocess
import sys

import pytest

from tfagents_vtrace.runtime.rundir import run_dir
from tfagents_vtrace.runtime.rundir.run_lock import LOCK_NAME, RunDirLockedError, RunLock

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Imports no TensorFlow: the holder is ready in well under a second.
HOLDER = (
    "import sys, time\n"
    "from tfagents_vtrace.runtime.rundir.run_lock import RunLock\n"
    "lock = RunLock(sys.argv[1]).acquire()\n"
    "print('locked', flush=True)\n"
    "time.sleep(300)\n"
)


@pytest.fixture
def holder(tmp_path):
    """A subprocess holding the lock of ``tmp_path / "run"``; killed at the end."""
    logdir = str(tmp_path / "run")
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, logdir], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "locked"
        yield logdir, proc
    finally:
        proc.kill()
        proc.wait()


def test_a_second_process_is_refused_naming_the_holder_until_it_is_killed(holder):
    logdir, proc = holder
    with pytest.raises(RunDirLockedError) as err:
        RunLock(logdir).acquire()
    assert err.value.pid == proc.pid
    assert str(err.value) == (
        f"logdir: {logdir!r} is in use by another trainer (pid {proc.pid}); wait for it to "
        "end, stop it, or choose another logdir"
    )
    proc.kill()  # SIGKILL: no clean-up runs, the kernel drops the lock
    proc.wait()
    with RunLock(logdir) as lock:
        assert lock.held
        with open(os.path.join(logdir, LOCK_NAME)) as f:
            assert f.read().strip() == str(os.getpid())
    assert not lock.held


def test_in_process_locks_conflict_and_release(tmp_path):
    first = RunLock(str(tmp_path)).acquire()
    with pytest.raises(RunDirLockedError, match=rf"\(pid {os.getpid()}\)"):
        RunLock(str(tmp_path)).acquire()
    first.release()
    RunLock(str(tmp_path)).acquire().release()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"^logdir: .*file' exists and is not a directory$"):
        RunLock(str(tmp_path / "file")).acquire()


def test_discard_removes_only_a_lock_file_it_created(tmp_path):
    RunLock(str(tmp_path)).acquire().release(discard=True)
    assert os.listdir(tmp_path) == []
    RunLock(str(tmp_path)).acquire().release()
    RunLock(str(tmp_path)).acquire().release(discard=True)  # the file was there already
    assert os.listdir(tmp_path) == [LOCK_NAME]


def test_prepare_logdir_does_not_count_the_lock_file(tmp_path):
    config = {"agent": "impala", "env_id": "CartPole-v1", "network_config": {}}
    with RunLock(str(tmp_path)):
        assert run_dir.prepare_logdir(str(tmp_path), config) == "new"
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(ValueError, match=r"holds files \(notes\.txt\) but no checkpoint"):
            run_dir.prepare_logdir(str(tmp_path), config)
        assert run_dir.prepare_logdir(str(tmp_path), config, overwrite=True) == "new"
    assert sorted(os.listdir(tmp_path)) == [LOCK_NAME, "notes.txt"]


def test_a_second_trainer_on_the_same_logdir_ends_with_one_line(holder):
    logdir, proc = holder
    cmd = [sys.executable, "-m", "experiments.train", f"--logdir={logdir}", "--env=CartPole-v1",
           "--num_envs=4", "--unroll_length=8", "--hidden_sizes=8", "--total_steps=64"]  # fmt: skip
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        f"error: --logdir: {logdir!r} is in use by another trainer (pid {proc.pid}); wait for it "
        "to end, stop it, or choose another logdir"
    )
    assert os.listdir(logdir) == [LOCK_NAME]  # nothing written, nothing truncated


def test_discard_removes_the_directory_it_created_when_empty(tmp_path):
    RunLock(str(tmp_path / "new")).acquire().release(discard=True)
    assert os.listdir(tmp_path) == []
    lock = RunLock(str(tmp_path / "new")).acquire()
    (tmp_path / "new" / "config.json").write_text("{}")
    lock.release(discard=True)
    assert os.listdir(tmp_path / "new") == ["config.json"]


def test_a_lock_file_discarded_meanwhile_is_not_locked(tmp_path, monkeypatch):
    """A process that opened the lock file just before its holder discarded it must not
    believe it holds the lock: it locks the file now at the path instead."""
    import tfagents_vtrace.runtime.rundir.run_lock as run_lock

    path = tmp_path / LOCK_NAME
    real_open, opened = os.open, []

    def open_then_discard(name, flags, *mode):
        fd = real_open(name, flags, *mode)
        if not opened:  # the holder discards the file between our open and our flock
            opened.append(fd)
            os.unlink(path)
        return fd

    path.write_text("")
    monkeypatch.setattr(run_lock.os, "open", open_then_discard)
    lock = RunLock(str(tmp_path)).acquire()
    monkeypatch.undo()
    assert lock.held and os.path.exists(path)
    with pytest.raises(RunDirLockedError):
        RunLock(str(tmp_path)).acquire()  # the file at the path is the locked one
    lock.release()
