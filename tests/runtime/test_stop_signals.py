"""Every stop is a checkpoint: SIGTERM, SIGINT and SIGHUP end a run within its grace period
with a checkpoint of its newest state, also while an environment hangs; a closed output
stream never ends a run.

A batch scheduler's stop is SIGTERM then SIGKILL after a grace period (Slurm's ``KillWait``,
Kubernetes' ``terminationGracePeriodSeconds``); a closed SSH session is SIGHUP."""

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tfagents_vtrace.runtime.rundir import stop_signals

pytestmark = pytest.mark.xdist_group("stop_signals")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HANG = "tests.stop_envs:HangAfter-v0"
FAST = ("--nojit_compile", "--noexport", "--eval_every=0", "--eval_episodes=1")


# ------------------------------------------------------------------ the watchdog alone
class _Exit:
    def __init__(self):
        self.codes, self.called = [], threading.Event()

    def __call__(self, code):
        self.codes.append(code)
        self.called.set()


def test_the_watchdog_saves_a_run_that_did_not_stop_and_ends_it(capsys):
    calls, exit = [], _Exit()
    with stop_signals.register_saver(lambda: calls.append(1) or (1234, "/run/ckpt-1234")):
        watchdog = stop_signals.GraceWatchdog(0.4, exit=exit)
        start = time.monotonic()
        watchdog.arm()
        assert exit.called.wait(5)
    assert calls == [1] and exit.codes == [130]
    assert 0.2 <= time.monotonic() - start < 1.0
    assert "interrupted at step 1234; checkpoint /run/ckpt-1234" in capsys.readouterr().err


def test_the_watchdog_only_ends_a_run_whose_stop_was_saved_and_not_one_that_ended():
    calls, exit = [], _Exit()
    with stop_signals.register_saver(lambda: calls.append(1) or (1, "p")):
        stop_signals.stop_saved(5, "/run/ckpt-5")  # the loop stopped, closing is slow
        watchdog = stop_signals.GraceWatchdog(0.3, exit=exit)
        watchdog.arm()
        assert exit.called.wait(5)
        assert calls == [] and exit.codes == [130]
        ended, exit2 = stop_signals.GraceWatchdog(0.3, exit=_Exit()), None
        ended.arm()
        ended.disarm()  # the run ended by itself
        exit2 = ended._exit
        assert not exit2.called.wait(0.6)


def test_a_saver_that_fails_leaves_the_last_checkpoint_and_says_so(capsys):
    exit = _Exit()

    def broken():
        raise OSError("disk full")

    with stop_signals.register_saver(broken):
        stop_signals.GraceWatchdog(0.2, exit=exit).arm()
        assert exit.called.wait(5)
    err = capsys.readouterr().err
    assert exit.codes == [130] and "disk full" in err and "the last checkpoint is kept" in err


# ------------------------------------------------------------------ real runs
def _start(logdir, *flags, env=None, **popen):
    cmd = [sys.executable, "-m", "experiments.train", f"--logdir={logdir}", *FAST, *flags]
    environ = {**os.environ, **(env or {})}
    popen.setdefault("stdout", subprocess.PIPE)
    popen.setdefault("stderr", subprocess.PIPE)
    return subprocess.Popen(cmd, cwd=ROOT, env=environ, text=True, **popen)


def _wait_for(condition, timeout=90.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def _steps(logdir):
    names = os.listdir(os.path.join(logdir, "checkpoints"))
    return sorted(int(m.group(1)) for n in names if (m := re.match(r"ckpt-(\d+)\.index$", n)))


def _hung(logdir, after):
    """The run stepped past ``after`` (its metrics row) and its environment now hangs."""
    path = os.path.join(logdir, "metrics.jsonl")
    if not os.path.exists(path):
        return False
    with open(path) as f:
        return any(json.loads(line)["step"] >= after for line in f if line.strip())


@pytest.mark.parametrize(
    "sig, agent_flags",
    [
        # the learner's own thread is stuck in env.step
        (signal.SIGTERM, ("--config=impala_cartpole", "--log_every_steps=400")),
        # a worker thread is stuck in env.step; the driver stops, closing waits on it
        (signal.SIGINT, ("--config=a3c_cartpole", "--log_every_steps=400")),
    ],
)
def test_a_signal_while_the_environment_hangs_checkpoints_within_the_grace(
    tmp_path, sig, agent_flags
):
    logdir = str(tmp_path / "run")
    with open(tmp_path / "err", "w") as log:
        proc = _start(logdir, *agent_flags, f"--env={HANG}", "--total_steps=1000000",
                      "--stop_grace_s=4", env={"TFV_HANG_AFTER": "2400"}, stderr=log)  # fmt: skip
        try:
            _wait_for(lambda: _hung(logdir, 1200))
            time.sleep(1.0)  # stepping stopped: every environment of the run is stuck
            sent = time.monotonic()
            proc.send_signal(sig)
            proc.wait(timeout=30)
            waited = time.monotonic() - sent
        finally:
            proc.kill()
    err = (tmp_path / "err").read_text()
    assert proc.returncode == 130, err[-2000:]
    assert waited < 4.0 + 1.0  # the grace, and the interpreter's exit
    saved = max(_steps(logdir))
    assert saved >= 1200  # the newest state, not the step-0 checkpoint
    assert f"interrupted at step {saved}; checkpoint" in err
    assert "Traceback" not in err


def test_an_evaluation_whose_environment_hangs_stops_the_run_with_a_checkpoint(tmp_path):
    """The greedy evaluation steps in the learner's thread: past --env_step_timeout_s the run
    is checkpointed from another thread and ends with exit code 1 (a fault)."""
    logdir = str(tmp_path / "run")
    with open(tmp_path / "err", "w") as log:
        proc = _start(logdir, "--config=a3c_cartpole", "--env=tests.stop_envs:EvalHang-v0",
                      "--total_steps=1000000", "--eval_every=2000", "--env_step_timeout_s=2",
                      "--stop_grace_s=4", env={"TFV_EVALHANG_AFTER": "10"}, stderr=log)  # fmt: skip
        try:
            proc.wait(timeout=90)
        finally:
            proc.kill()
    err = (tmp_path / "err").read_text()
    assert proc.returncode == 1, err[-2000:]
    assert "the evaluation environment: an environment call has not returned" in err
    saved = max(_steps(logdir))
    assert saved >= 2000 and f"checkpoint {logdir}/checkpoints/ckpt-{saved}" in err


def test_sighup_checkpoints_a_threaded_run_and_the_same_command_resumes(tmp_path):
    logdir = str(tmp_path / "run")
    flags = ("--config=impala_cartpole", "--num_actors=2", "--log_every_steps=400")
    proc = _start(logdir, *flags, "--total_steps=1000000")
    try:
        _wait_for(lambda: _hung(logdir, 2000))
        proc.send_signal(signal.SIGHUP)  # the terminal closed
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    saved = max(_steps(logdir))
    assert saved >= 2000 and f"interrupted at step {saved}" in err
    resumed = _start(logdir, *flags, f"--total_steps={saved + 800}")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err[-2000:]
    final = json.loads(out.strip().splitlines()[-1])
    assert final["resumed"] and final["step"] >= saved + 800


def test_sigterm_to_one_multi_worker_learner_stops_every_worker_at_one_checkpoint(tmp_path):
    """A scheduler may signal one task first: the workers agree on the stop at one update
    (a collective) and save together; the chief's checkpoint is the newest state."""
    from tests.free_ports import free_ports

    logdir, ports = str(tmp_path / "run"), free_ports(2)
    cluster = {"worker": [f"localhost:{p}" for p in ports]}
    procs = []
    for index in range(2):
        tf_config = json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})
        err = open(tmp_path / f"err{index}", "w")
        procs.append(_start(logdir, "--config=impala_cartpole", "--strategy=multi_worker",
                            "--total_steps=1000000", "--log_every_steps=400",
                            env={"TF_CONFIG": tf_config}, stderr=err))  # fmt: skip
    try:
        _wait_for(lambda: _hung(logdir, 800))
        procs[0].send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=60) for p in procs]
    finally:
        for p in procs:
            p.kill()
    errs = [(tmp_path / f"err{i}").read_text() for i in range(2)]
    assert codes == [130, 130], errs[0][-2000:] + errs[1][-2000:]
    saved = max(_steps(logdir))
    assert saved >= 800
    for err in errs:  # both stopped at the same step
        assert f"interrupted at step {saved}; checkpoint" in err


def test_a_closed_output_pipe_never_ends_a_run(tmp_path):
    """``tfv-train ... 2>&1 | head``: the reader goes away after a few lines."""
    logdir = str(tmp_path / "run")
    proc = _start(logdir, "--config=impala_cartpole", "--total_steps=6000", "--log_every_s=0.05",
                  stderr=subprocess.STDOUT)  # fmt: skip
    for _ in range(3):
        proc.stdout.readline()
    proc.stdout.close()
    assert proc.wait(timeout=120) == 0
    with open(os.path.join(logdir, "final.json")) as f:
        final = json.load(f)
    assert final["step"] >= 6000
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        steps = [json.loads(line)["step"] for line in f]
    assert steps[-1] == final["step"] and len(steps) >= 3 and steps == sorted(set(steps))
