"""The training loop: env failures, non-finite losses, resuming a run directory."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from tests.runtime.test_actor import FailingVectorEnv, short_cartpole
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.loop import NonFiniteLossError, Trainer, train
from tfagents_vtrace.runtime.run_dir import restore_network

AGENT = get_agent("impala")
NET = NetworkConfig(hidden_sizes=(16,))


def _run(total_steps=1024, **kw):
    kw.setdefault("log_every_s", 0.01)
    return RunConfig(total_steps=total_steps, num_envs=8, unroll_length=8, eval_episodes=2,
                     export_policy=False, **kw)  # fmt: skip


def _rows(logdir):
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


class NanRewards(gym.vector.VectorWrapper):
    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        return obs, reward * np.nan, terminated, truncated, info


@pytest.mark.parametrize("num_actors", [0, 1])
def test_env_that_raises_does_not_stop_training(tmp_path, num_actors):
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    # Two crashes, both while training: a final evaluation whose episodes outlast 40 steps
    # would otherwise crash on every retry once the policy is good (a flaky failure).
    factory = lambda n, seed: FailingVectorEnv(short_cartpole(n, seed, 50), 40, max_failures=2)
    run = _run(2048, num_actors=num_actors)
    final = train(run, AGENT, AGENT.Config(), NET, str(tmp_path), env_factory=factory)
    assert final["step"] >= 2048 and final["env_restarts"] >= 2
    assert _rows(str(tmp_path))[-1]["env_restarts"] == final["env_restarts"]


def test_non_finite_losses_stop_training_with_a_good_checkpoint(tmp_path):
    factory = lambda n, seed: NanRewards(short_cartpole(n, seed, 50))
    config = AGENT.Config(max_nonfinite_updates=3)
    trainer = Trainer(_run(10_000), AGENT, config, NET, str(tmp_path), env_factory=factory)
    initial = trainer.learner.network.get_weights()
    with pytest.raises(NonFiniteLossError, match="3 consecutive updates"):
        trainer.run()
    assert trainer.updates == 3
    restored = restore_network(str(tmp_path)).get_weights()
    for a, b in zip(initial, restored):  # every update was skipped: the weights are intact
        np.testing.assert_array_equal(a, b)


def test_training_into_an_existing_run_dir_resumes(tmp_path):
    logdir = str(tmp_path)
    first = train(_run(1024, eval_every=512), AGENT, AGENT.Config(), NET, logdir)
    assert not first["resumed"] and first["step"] == 1024
    saved = restore_network(logdir).get_weights()
    trainer = Trainer(_run(2048, eval_every=512), AGENT, AGENT.Config(), NET, logdir)
    for a, b in zip(saved, trainer.learner.network.get_weights()):  # network restored
        np.testing.assert_array_equal(a, b)
    assert int(trainer.learner.optimizer.iterations.numpy()) == 16  # optimizer restored
    second = trainer.run()
    assert second["resumed"] and second["step"] == 2048 and second["updates"] == 32
    steps = [row["step"] for row in _rows(logdir)]
    assert steps == sorted(set(steps)) and steps[-1] == 2048
    assert any("eval_return" in row for row in _rows(logdir))
    walls = [row["wall_time"] for row in _rows(logdir)]
    assert walls == sorted(walls)  # wall time continues across the resume
