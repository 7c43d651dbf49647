"""A replay capacity that cannot fit in memory is refused before the run starts, in one line
naming ``replay_capacity`` with the estimate (ACER's episodic replay, TAAC's ring buffers)."""

import os
import re
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.replay import capacity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TF_LOG = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before absl::")


def test_space_bytes_count_every_leaf_as_numpy_holds_it():
    box = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    assert capacity.space_bytes(box) == 84 * 84 * 4
    assert capacity.space_bytes(gym.spaces.Box(-1, 1, (3,), np.float32)) == 12
    assert capacity.space_bytes(gym.spaces.Discrete(6)) == 8
    assert capacity.space_bytes(gym.spaces.MultiBinary(5)) == 5
    nested = gym.spaces.Dict(
        {"image": box, "pair": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1)))}
    )
    assert capacity.space_bytes(nested) == 84 * 84 * 4 + 8 + 4


def test_check_fits_refuses_only_what_exceeds_memory_in_one_line(monkeypatch):
    capacity.check_fits("replay_capacity", 1000, 100, "x", memory=100_000)  # exactly fits
    with pytest.raises(ValueError) as raised:
        capacity.check_fits("replay_capacity", 1001, 100, "x's steps", memory=100_000)
    message = str(raised.value)
    assert message == (
        "replay_capacity: 1001 transitions need at least 100.1 KB (100 bytes each: x's steps), "
        "more than this machine's memory (100.0 KB); expected at most 1000 transitions"
    )
    monkeypatch.setattr(capacity, "machine_memory", lambda: None)
    capacity.check_fits("replay_capacity", 10**15, 100, "x")  # memory unknown: no check
    assert capacity.human_bytes(52e12) == "52.0 TB" and capacity.human_bytes(999) == "999 bytes"


def test_machine_memory_is_the_physical_memory_or_less():
    memory = capacity.machine_memory()
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert memory is not None and 0 < memory <= physical


@pytest.mark.parametrize(
    "agent, env, step_bytes",
    [
        # 4 float32 observations, an int64 action, 2 float32 logits, a float32 reward, 2 flags
        ("acer", "CartPole-v1", 16 + 8 + 8 + 4 + 2),
        # 3 float32 observations, a float32 action, its mean and scale, reward, flags
        ("acer", "Pendulum-v1", 12 + 4 + 8 + 4 + 2),
        # replay_specs: observation, reward, discount, flag, two trajectories, an int32
        ("taac", "Pendulum-v1", 12 + 4 + 4 + 1 + 4 + 4 + 4),
    ],
)
def test_a_capacity_beyond_memory_is_refused_with_the_estimate(agent, env, step_bytes):
    with pytest.raises(ValueError) as raised:
        tv.make_configs(agent, env, replay_capacity=10**12)
    message = str(raised.value)
    assert message.startswith(
        f"replay_capacity: 1000000000000 transitions need at least "
        f"{capacity.human_bytes(10**12 * step_bytes)} ({step_bytes} bytes each: {env}'s "
    ), message
    assert "more than this machine's memory" in message and "\n" not in message
    configs = tv.make_configs(agent, env)  # the default fits
    assert configs.agent_config.replay_capacity == 100_000


def test_the_memory_decides(monkeypatch):
    monkeypatch.setattr(capacity, "machine_memory", lambda: 1_000_000)
    with pytest.raises(ValueError, match=r"^replay_capacity: 100000 transitions need at least "):
        tv.make_configs("acer", "CartPole-v1")
    tv.make_configs("acer", "CartPole-v1", replay_capacity=20_000)  # 760 KB
    tv.make_configs("impala", "CartPole-v1")  # no replay: nothing checked


def test_impalas_replay_of_unrolls_is_checked_too():
    # 32 columns x (6 observations of 16 bytes + 5 x (an int64 action, a reward, 2 flags))
    per_unroll = 32 * (6 * 16 + 5 * (8 + 4 + 2))
    with pytest.raises(ValueError) as raised:
        tv.make_configs(flagfile="impala_cartpole", replay_ratio=1, replay_unrolls=10**12)
    assert str(raised.value).startswith(
        f"replay_unrolls: 1000000000000 unrolls need at least "
        f"{capacity.human_bytes(10**12 * per_unroll)} ({per_unroll} bytes each: 32 columns of 5 "
        "steps of CartPole-v1)"
    ), str(raised.value)
    tv.make_configs(flagfile="impala_cartpole", replay_ratio=1, replay_unrolls=1000)


class Unmakeable(gym.Env):
    observation_space = gym.spaces.Box(-1, 1, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        raise RuntimeError("no simulator licence")


def test_an_environment_that_cannot_be_made_is_left_to_the_run_to_report():
    from tfagents_vtrace.agents.acer.config import AcerConfig, check_run
    from tfagents_vtrace.envs.user_envs import resolve_env
    from tfagents_vtrace.runtime.config import RunConfig

    env_id = resolve_env(Unmakeable)
    check_run(AcerConfig(replay_capacity=10**12), RunConfig(env_id=env_id))  # no ValueError


def test_the_python_api_refuses_before_writing(tmp_path):
    with pytest.raises(ValueError, match=r"^replay_capacity: .* more than this machine's memory"):
        tv.train("taac", "Pendulum-v1", logdir=tmp_path / "run", replay_capacity=10**12)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_the_command_refuses_it_in_one_line_and_exit_2(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--config=taac_pendulum",
         f"--logdir={tmp_path / 'run'}", "--replay_capacity=1000000000000"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )  # fmt: skip
    lines = [line for line in out.stderr.splitlines() if line.strip() and not TF_LOG.match(line)]
    assert out.returncode == 2 and len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith("error: --replay_capacity: 1000000000000 transitions need at least")
    assert not (tmp_path / "run").exists()
