"""Every end of ``tfv-train`` is one line: a non-finite loss, memory running out and any other
exception (exit code 1, naming the cause and what to do), a run directory with damaged
checkpoints for ``tfv-export`` (exit code 1), Ctrl-C while the command starts (exit code 130).
Each command case is a subprocess, as a user runs it, with the environments of a user module
written next to the run."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tfagents_vtrace.commands import common

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRACEBACK = "Traceback (most recent call last)"
# TensorFlow's C++ start-up log goes to stderr whatever TF_CPP_MIN_LOG_LEVEL says.
TF_LOG = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before absl::")

MODULE = '''
import os
import time

import gymnasium as gym
import numpy as np

MADE = [0]


class Base(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(4, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(4, 0.1, np.float32), self.reward, False, self.t >= 20, {}

    reward = 1.0


class HugeReward(Base):
    """Rewards of 1e30: finite, but squared value errors overflow float32."""

    reward = 1e30


class Failing(Base):
    """The space check's environment is made; the run's raise ``FAULT`` (a name)."""

    def __init__(self):
        MADE[0] += 1
        if MADE[0] > 1:
            faults = {
                "memory": lambda: MemoryError("cannot allocate 8589934592 bytes"),
                "bug": lambda: KeyError("observation"),
            }
            raise faults[os.environ["FAULT"]]()


class SlowToMake(Base):
    """Marks ``MARK`` when the run's start makes it (past the imports), then takes its time."""

    def __init__(self):
        open(os.environ["MARK"], "w").close()
        time.sleep(30)


for cls in (HugeReward, Failing, SlowToMake):
    gym.register(f"{cls.__name__}-v0", entry_point=cls)
'''


def _env(tmp_path, **extra):
    (tmp_path / "faulty_envs.py").write_text(MODULE)
    return dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=f"{tmp_path}:{ROOT}", **extra)


def _train(tmp_path, env_id, *args, **extra):
    cmd = [sys.executable, "-m", "experiments.train", "--config=impala_cartpole",
           f"--env=faulty_envs:{env_id}", f"--logdir={tmp_path / 'run'}", "--nojit_compile",
           "--noexport", "--eval_episodes=1", "--num_envs=8", "--total_steps=4000",
           *args]  # fmt: skip
    return subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path, **extra), capture_output=True,
                          text=True, timeout=180)  # fmt: skip


def _error_line(out) -> str:
    lines = [line for line in out.stderr.splitlines() if line.startswith("error: ")]
    assert out.returncode == 1, out.stderr[-3000:]
    assert TRACEBACK not in out.stderr, out.stderr[-3000:]
    assert len(lines) == 1, out.stderr[-3000:]
    return lines[0]


# ----------------------------------------------------------------------------- the messages
def test_fault_messages_are_one_line_naming_the_cause_and_what_to_do():
    import tensorflow as tf

    from tfagents_vtrace.runtime.driver import NonFiniteLossError

    error = NonFiniteLossError("10 consecutive updates had a non-finite loss (at step 5).")
    assert common.fault_message(error).startswith("10 consecutive updates had a non-finite")
    assert "Lower --learning_rate" in common.fault_message(error)
    tf_error = tf.errors.ResourceExhaustedError(None, None, "OOM when allocating\ngraph")
    for error in (MemoryError("Unable to allocate 10.9 TiB\nmore"), tf_error):
        error.add_note("checkpoint DIR/checkpoints/ckpt-8 holds the newest state")
        message = common.fault_message(error)
        assert message.startswith("out of memory (") and "\n" not in message, message
        assert "(checkpoint DIR/checkpoints/ckpt-8 holds the newest state)" in message
        assert "--replay_capacity" in message and "run the same command" in message
    message = common.fault_message(KeyError("x" * 1000))
    assert message.startswith("KeyError: 'xxx") and len(message) < 500 and "\n" not in message
    assert "TFV_TRACEBACK=1" in message


# ----------------------------------------------------------------------------- the command
@pytest.mark.slow  # a training subprocess
def test_a_non_finite_loss_is_one_line_and_the_last_good_weights_are_kept(tmp_path):
    out = _train(tmp_path, "HugeReward-v0")
    line = _error_line(out)
    assert "consecutive updates had a non-finite loss or gradient" in line, line
    assert "Lower --learning_rate" in line
    path = line.split("checkpoint ", 1)[1].split(". ")[0]
    assert os.path.exists(path + ".index"), line


@pytest.mark.slow  # training subprocesses
@pytest.mark.parametrize(
    "fault, expected",
    [
        ("memory", "error: out of memory (MemoryError: cannot allocate 8589934592 bytes)"),
        ("bug", "error: KeyError: 'observation'; the run stopped: fix the cause"),
    ],
)
def test_an_exception_ending_the_run_is_one_line_and_exit_1(tmp_path, fault, expected):
    out = _train(tmp_path, "Failing-v0", FAULT=fault)
    line = _error_line(out)
    assert line.startswith(expected), line
    assert not (tmp_path / "run").exists()  # a start that failed leaves nothing behind
    if fault == "bug":  # the traceback, on request
        out = _train(tmp_path, "Failing-v0", FAULT=fault, TFV_TRACEBACK="1")
        assert out.returncode == 1 and TRACEBACK in out.stderr and "KeyError" in out.stderr


def _interrupt_after(cmd, delay, env, mark=None):
    """Ctrl-C ``delay`` seconds after ``cmd`` starts, or once the file ``mark`` exists."""
    process = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # as a terminal runs it
    )  # fmt: skip
    deadline = time.monotonic() + 120
    if mark is None:
        time.sleep(delay)
    while mark is not None and not os.path.exists(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    return process.returncode, err


@pytest.mark.slow  # subprocesses importing TensorFlow
@pytest.mark.parametrize("when", ["importing", "making_the_env"])
def test_ctrl_c_while_starting_is_one_line_and_exit_130(tmp_path, when):
    cmd = [sys.executable, "-m", "experiments.train", "--config=impala_cartpole",
           "--env=faulty_envs:SlowToMake-v0", f"--logdir={tmp_path / 'run'}"]  # fmt: skip
    mark = str(tmp_path / "made")
    env = _env(tmp_path, MARK=mark)
    code, err = _interrupt_after(cmd, 1.0, env, mark if when == "making_the_env" else None)
    lines = [line for line in err.splitlines() if line.strip() and not TF_LOG.match(line)]
    assert code == 130 and TRACEBACK not in err, err[-3000:]
    trained = "interrupted while starting; nothing was trained: run the same command to start"
    written = "interrupted while starting; nothing was written: run the command again"
    # Importing TensorFlow takes seconds: 1 s in, the imports are (most likely) still running.
    assert lines in ([trained], [written] if when == "importing" else [trained]), err[-3000:]
    assert not (tmp_path / "run").exists()


# ----------------------------------------------------------------------------- tfv-export
@pytest.mark.slow  # a subprocess importing TensorFlow
def test_export_of_a_run_whose_checkpoints_are_all_damaged_is_one_line_and_exit_1(tmp_path):
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.config import RunConfig
    from tfagents_vtrace.runtime.rundir import config_io

    logdir = tmp_path / "run"
    agent = get_agent("impala")
    config = config_io.run_config_dict(
        "impala", RunConfig(total_steps=100), agent.Config(), NetworkConfig(hidden_sizes=(8,))
    )
    config_io.write_config(str(logdir), config)
    (logdir / "checkpoints").mkdir()
    for name in ("ckpt-64.index", "ckpt-64.data-00000-of-00001"):  # complete, but cut to 0
        (logdir / "checkpoints" / name).write_bytes(b"")
    out = subprocess.run(
        [sys.executable, "-m", "experiments.export", f"--logdir={logdir}",
         f"--output={tmp_path / 'policy'}"],
        cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    line = _error_line(out)
    assert line.startswith(
        f"error: --logdir: no intact checkpoint in {str(logdir / 'checkpoints')!r}"
    )
    assert "ckpt-64 (" in line and not (tmp_path / "policy").exists()
