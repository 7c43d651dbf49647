"""TAAC learner, loop, checkpoint/resume and export (arXiv 2104.06521).

The export test drives the loaded SavedModel and the in-process policy with the same seed
and observations for 50 steps: the repeat decisions, repeat counts and actions must agree.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.taac import TaacConfig, TaacLearner, TaacPolicy
from tfagents_vtrace.agents.taac.export import export_taac_policy
from tfagents_vtrace.agents.taac.learner import BATCH_KEYS
from tfagents_vtrace.runtime.config import RunConfig

SMALL = dict(
    actor_hidden_sizes=(16,),
    critic_hidden_sizes=(16,),
    mini_batch_size=8,
    mini_batch_length=3,
    jit_compile=False,
)


def _batch(rng, k, t, b, order, adim=1, obs_dim=3):
    return {
        "observation": rng.normal(size=(k, t, b, obs_dim)).astype(np.float32),
        "reward": rng.normal(size=(k, t, b)).astype(np.float32),
        "discount": np.ones((k, t, b), np.float32),
        "is_last": rng.random((k, t, b)) < 0.1,
        "prev_tau": rng.uniform(-1, 1, (k, t, b, order, adim)).astype(np.float32),
        "tau": rng.uniform(-1, 1, (k, t, b, order, adim)).astype(np.float32),
        "b": (rng.random((k, t, b)) < 0.3).astype(np.int32),
    }


def test_learner_updates_soft_target_and_temperatures(rng):
    # Target entropies far above any reachable ones push both temperatures up.
    cfg = TaacConfig(target_update_tau=0.25, target_entropy=50.0, b_target_entropy=5.0, **SMALL)
    learner = TaacLearner(cfg, (3,), 1)
    before = [w.copy() for w in learner.critics.get_weights()]
    batch = _batch(rng, 1, 3, 8, learner.trajectory.order)
    with pytest.raises(ValueError, match="missing keys"):
        learner.train({k: batch[k] for k in BATCH_KEYS[:-1]})
    metrics = learner.train(batch)
    assert set(metrics) >= {"critic_loss", "actor_loss", "p_b1", "alpha_a", "alpha_b"}
    assert all(np.isfinite(v) for v in metrics.values())
    assert any(not np.allclose(a, b) for a, b in zip(before, learner.critics.get_weights()))
    # target' = target + .25 (critic' - target), checked on the next update.
    tgt = [w.copy() for w in learner.target_critics.get_weights()]
    learner.train(_batch(rng, 1, 3, 8, 1))
    want = [t + 0.25 * (c - t) for t, c in zip(tgt, learner.critics.get_weights(), strict=True)]
    for got, w in zip(learner.target_critics.get_weights(), want, strict=True):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
    assert int(learner.updates.numpy()) == 2
    assert learner.log_alpha_a.numpy() > 0.0 and learner.log_alpha_b.numpy() > 0.0


def test_export_repeats_match_in_process_policy(tmp_path, rng):
    cfg = TaacConfig(trajectory="quadratic", max_repeat_steps=4, **SMALL)
    learner = TaacLearner(cfg, (3,), 1, seed=0)
    space = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    path = export_taac_policy(learner, str(tmp_path / "policy"), space, seed=5)
    loaded = tf.saved_model.load(path)
    meta = json.loads(loaded.metadata.numpy().decode())
    assert meta["policy_kind"] == "taac" and meta["state_sizes"] == [3, 1]
    for greedy in (False, True):
        policy = TaacPolicy(learner, greedy, space.low, space.high, seed=5)
        loaded = tf.saved_model.load(path)  # its call counter starts at 0, like the policy's
        fn = loaded.greedy_action if greedy else loaded.action
        n = 3
        state = policy.initial_state(n)
        saved_state = loaded.get_initial_state(batch_size=tf.constant(n))
        b_all, rep_all = [], []
        for t in range(50):
            obs = rng.normal(size=(n, 3)).astype(np.float32)
            first = np.array([t == 0, t % 17 == 0, False])
            action, info, state = policy.step(obs, first, None, None, state)
            out = fn(
                observation=obs, first=first, prev_action=np.zeros((n, 1), np.float32),
                prev_reward=np.zeros(n, np.float32), state=saved_state,
            )  # fmt: skip
            saved_state = out["state"]
            np.testing.assert_array_equal(out["b"].numpy(), info["b"])
            np.testing.assert_array_equal(out["repeats"].numpy(), info["repeats"])
            np.testing.assert_allclose(out["action"].numpy(), action, rtol=1e-5, atol=1e-6)
            b_all.append(info["b"])
            rep_all.append(info["repeats"])
        b_all, rep_all = np.array(b_all), np.array(rep_all)
        assert 0 < b_all.mean() < 1  # both repeats and switches happened
        assert rep_all.max() <= cfg.max_repeat_steps
    fresh = tf.saved_model.load(path)  # the signatures for TF Serving exist too
    assert {"serving_default", "action", "greedy_action"} <= set(fresh.signatures)


def test_train_loop_checkpoints_replay_and_resumes(tmp_path):
    from tfagents_vtrace.agents.taac import train

    cfg = TaacConfig(
        trajectory="linear", initial_collect_steps=40, train_interval=4, updates_per_train=2,
        **SMALL,
    )  # fmt: skip
    run = RunConfig(
        env_id="Pendulum-v1", seed=1, total_steps=120, num_envs=2, eval_every=60,
        eval_episodes=2, log_every_s=0.01, export_policy=True,
    )  # fmt: skip
    logdir = str(tmp_path / "run")
    final = train(run, cfg, None, logdir)
    assert final["final"] and final["step"] == 120 and final["updates"] > 0
    assert np.isfinite(final["eval_return"]) and final["eval_repeat_length"] >= 1.0
    rows = [json.loads(line) for line in open(f"{logdir}/metrics.jsonl")]
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert any("eval_return" in r for r in rows) and rows[-1]["repeat_length"] >= 1.0
    assert (tmp_path / "run" / "checkpoints" / "replay-120.npz").exists()
    assert (tmp_path / "run" / "policy" / "saved_model.pb").exists()
    run2 = RunConfig(**{**run.__dict__, "total_steps": 160, "export_policy": False})
    final2 = train(run2, cfg, None, logdir)
    assert final2["resumed"] and final2["step"] == 160
    assert final2["updates"] > final["updates"]


def test_ray_backend_is_refused_with_a_clear_error(tmp_path):
    from tfagents_vtrace.agents.taac import train

    run = RunConfig(env_id="Pendulum-v1", backend="ray", num_actors=1, total_steps=100)
    with pytest.raises(ValueError, match="backend"):
        train(run, TaacConfig(), None, str(tmp_path))
