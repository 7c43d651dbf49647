"""The training loop: env failures, non-finite losses, resuming a run directory, timings."""

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from tests.runtime.test_actor import FailingVectorEnv, short_cartpole
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.acting.time_shares import bottleneck, time_fractions
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import NonFiniteLossError, make_driver, train
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

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
    """Finite rewards of 1e30: squared value errors overflow float32 (a non-finite loss);
    NaN rewards themselves are refused by the actor as an environment failure."""

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        return obs, np.full_like(reward, 1e30, dtype=np.float64), terminated, truncated, info


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
    trainer = make_driver(_run(10_000), AGENT, config, NET, str(tmp_path), env_factory=factory)
    initial = trainer.agent.learner.network.get_weights()
    with pytest.raises(NonFiniteLossError, match="3 consecutive updates"):
        trainer.run()
    assert trainer.counters.updates == 3
    restored = restore_network(str(tmp_path)).get_weights()
    for a, b in zip(initial, restored):  # every update was skipped: the weights are intact
        np.testing.assert_array_equal(a, b)


def test_training_into_an_existing_run_dir_resumes(tmp_path):
    logdir = str(tmp_path)
    first = train(_run(1024, eval_every=512), AGENT, AGENT.Config(), NET, logdir)
    assert not first["resumed"] and first["step"] == 1024
    saved = restore_network(logdir).get_weights()
    trainer = make_driver(_run(2048, eval_every=512), AGENT, AGENT.Config(), NET, logdir)
    for a, b in zip(saved, trainer.agent.learner.network.get_weights()):  # network restored
        np.testing.assert_array_equal(a, b)
    sgd_steps = 16 * AGENT.Config().sgd_steps  # 16 updates of num_epochs * num_minibatches
    assert int(trainer.agent.learner.optimizer.iterations.numpy()) == sgd_steps  # restored
    second = trainer.run()
    assert second["resumed"] and second["step"] == 2048 and second["updates"] == 32
    steps = [row["step"] for row in _rows(logdir)]
    assert steps == sorted(set(steps)) and steps[-1] == 2048
    assert any("eval_return" in row for row in _rows(logdir))
    walls = [row["wall_time"] for row in _rows(logdir)]
    assert walls == sorted(walls)  # wall time continues across the resume


TIMES = ("env", "inference", "weights", "wait", "learner", "publish", "eval")
LEARNER_THREAD = ("wait", "learner", "publish", "eval")


def _fractions(**kw):
    return {f"time_{part}": kw.get(part, 0.0) for part in TIMES}


def test_bottleneck_rule():
    # Actor threads: a learner that hardly waits limits; a waiting one is starved by actors.
    busy = _fractions(env=0.9, inference=0.05, wait=0.05, learner=0.8, publish=0.1)
    assert bottleneck(busy, inline=False) == "learner"
    assert bottleneck(dict(busy, time_eval=0.85), inline=False) == "eval"
    starved = _fractions(env=0.3, inference=0.6, wait=0.5, learner=0.4)
    assert bottleneck(starved, inline=False) == "inference"
    assert bottleneck(dict(starved, time_env=0.7), inline=False) == "env"
    # Inline: one thread does everything in turn; the largest part, never "wait".
    inline = _fractions(env=0.3, inference=0.2, wait=0.6, learner=0.4)
    assert bottleneck(inline, inline=True) == "learner"


def test_time_fractions_divide_actor_time_by_all_actors_wall_time():
    actor = {"env": 3.0, "inference": 1.0, "weights": 0.0}
    learner = {"wait": 0.5, "learner": 1.2345, "publish": 0.1, "eval": 5.0}
    row = time_fractions(actor, learner, 2.0, actor_threads=3)
    assert row == {"time_env": 0.5, "time_inference": 0.167, "time_weights": 0.0,
                   "time_wait": 0.25, "time_learner": 0.617, "time_publish": 0.05,
                   "time_eval": 1.0}  # fmt: skip
    assert time_fractions(actor, learner, 4.0, actor_threads=0)["time_env"] == 0.75


@pytest.mark.parametrize("num_actors", [0, 2])
def test_rows_say_where_the_time_went(tmp_path, num_actors):
    run = _run(1024, num_actors=num_actors, eval_every=512)
    train(run, AGENT, AGENT.Config(), NET, str(tmp_path))
    rows = _rows(str(tmp_path))
    assert rows and any(row["time_eval"] > 0 for row in rows)
    for row in rows:
        assert all(0.0 <= row[f"time_{part}"] <= 1.0 for part in TIMES), row
        parts = LEARNER_THREAD + (("env", "inference", "weights") if num_actors == 0 else ())
        assert sum(row[f"time_{part}"] for part in parts) <= 1.0 + 0.01, row
        assert row["bottleneck"] in TIMES
    assert any(row["time_env"] > 0 and row["time_inference"] > 0 for row in rows)
