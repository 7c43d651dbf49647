"""A full disk or a read-only directory ends a run with one WriteError naming the file, the
newest checkpoint written first where the disk allows (else the previous one intact), and the
same call resumes once there is room. Runs on a small tmpfs; skipped where mounting is not
allowed."""

import os
import subprocess

import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.runtime.rundir import checkpoint_files as files
from tfagents_vtrace.runtime.rundir.write_errors import WriteError

SETTINGS = dict(total_steps=20_000, num_envs=8, unroll_length=5, eval_every=2000,
                eval_episodes=2, checkpoint_every_s=0.3, hidden_sizes=(64, 64))  # fmt: skip


@pytest.fixture
def small_disk(tmp_path):
    """A 300 KiB tmpfs: room for the run's first checkpoints (~80 KB each), not for all."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=300k", "tmpfs", str(mount)],
                          capture_output=True)  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def _remount(mount, options):
    subprocess.run(["mount", "-o", f"remount,{options}", str(mount)], check=True)


def test_a_full_disk_is_one_error_and_the_run_resumes_when_there_is_room(small_disk):
    logdir = str(small_disk / "run")
    with pytest.raises(WriteError, match=r"No space left on device") as raised:
        tv.train("impala", env="CartPole-v1", logdir=logdir, **SETTINGS)
    assert "\n" not in str(raised.value) and raised.value.path.startswith(logdir)
    intact = files.complete_steps(os.path.join(logdir, "checkpoints"))
    assert intact and all(
        files.damage(files.prefix(os.path.join(logdir, "checkpoints"), s)) is None for s in intact
    )
    _remount(small_disk, "size=4m")
    final = tv.train("impala", env="CartPole-v1", logdir=logdir, **SETTINGS)
    assert final["resumed"] and final["step"] >= SETTINGS["total_steps"]
    names = os.listdir(os.path.join(logdir, "checkpoints"))
    assert not [n for n in names if n.endswith("_temp") or n.endswith(".tmp")]


def test_a_read_only_directory_is_one_error_naming_it(small_disk):
    logdir = str(small_disk / "run")
    _remount(small_disk, "ro")
    with pytest.raises(WriteError, match=r"could not write the run directory .*Read-only"):
        tv.train("impala", env="CartPole-v1", logdir=logdir, **SETTINGS)
