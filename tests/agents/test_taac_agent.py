"""TAAC learner, loop, checkpoint/resume and export (arXiv 2104.06521).

The export test drives the loaded SavedModel and the in-process policy with the same seed
and observations for 50 steps: the repeat decisions, repeat counts and actions must agree.
"""

import json

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.ray_kill import kill_worker_0_once
from tests.runtime import test_ray_backend as ray_tests
from tfagents_vtrace.agents.taac import TaacConfig, TaacLearner, TaacPolicy
from tfagents_vtrace.agents.taac.export import TaacPolicyModule
from tfagents_vtrace.agents.taac.learner import BATCH_KEYS
from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.rundir import metrics_log, stop_signals

ray_session = ray_tests.ray_session  # one local Ray per module (skips without Ray)

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
    cfg = TaacConfig(target_update_tau=0.25, target_entropy=(5.0, 50.0), **SMALL)
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
    path = export_policy(TaacPolicyModule(learner, space, seed=5), str(tmp_path / "policy"))
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


def test_export_value_is_the_beta_weighted_critic_value(tmp_path, rng):
    """``out["value"]`` [B] float32 = beta_0 Q(s, tau^-) + beta_1 Q(s, tau_hat), Q the twin
    minimum; checked in numpy from the learner's actor and critics (greedy, epsilon 0, first
    step: tau^- = 0, tau_hat = tanh(loc)) and, for sampled switches, from the new tau."""
    cfg = TaacConfig(trajectory="constant", epsilon_greedy=0.0, **SMALL)
    learner = TaacLearner(cfg, (3,), 2, seed=0)
    learner.log_alpha_b.assign(np.log(0.3))  # a temperature that makes both b likely
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    loaded = tf.saved_model.load(export_policy(TaacPolicyModule(learner, space), tmp_path / "p"))
    n = 64
    obs = rng.normal(size=(n, 3)).astype(np.float32)
    inputs = dict(
        observation=obs, first=np.ones(n, bool), prev_action=np.zeros((n, 2), np.float32),
        prev_reward=np.zeros(n, np.float32),
        state=loaded.get_initial_state(batch_size=tf.constant(n)),
    )  # fmt: skip

    def q_min(tau):  # [n, 1, 2] -> [n]
        return np.min(learner.critics(obs, tau).numpy(), axis=-1)

    q0 = q_min(np.zeros((n, 1, 2), np.float32))
    loc, _ = learner.actor(obs, np.zeros((n, 1, 2), np.float32))
    q1 = q_min(np.tanh(loc.numpy())[:, None, :])
    p1 = 1.0 / (1.0 + np.exp(-(q1 - q0) / 0.3))
    out = loaded.greedy_action(**inputs)
    assert out["value"].dtype == tf.float32 and out["value"].shape == (n,)
    np.testing.assert_allclose(out["p_b1"].numpy(), p1, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out["value"].numpy(), (1 - p1) * q0 + p1 * q1, rtol=1e-4, atol=1e-5)
    # Sampled: where b = 1 the new tau is tau_hat, so the value is known there.
    out = loaded.action(**inputs)
    b, p = out["b"].numpy().astype(bool), out["p_b1"].numpy()
    assert 0 < b.sum() < n
    q_hat = q_min(out["state"][0].numpy().reshape(n, 1, 2))
    want = (1 - p) * q0 + p * q_hat
    np.testing.assert_allclose(out["value"].numpy()[b], want[b], rtol=1e-4, atol=1e-5)
    flat = loaded.signatures["action"](
        **{k: tf.constant(v) for k, v in inputs.items() if k != "state"},
        state_0=tf.zeros([n, 2]), state_1=tf.zeros([n, 1]),
    )  # fmt: skip
    assert flat["value"].shape == (n,) and flat["value"].dtype == tf.float32


@pytest.mark.parametrize("jit", [False, True])
def test_a_non_finite_update_is_skipped_without_moving_any_optimizer_state(rng, jit):
    """Before the driver, TAAC zeroed the gradients but still applied them: Adam's moments
    moved the weights of a NaN update."""
    learner = TaacLearner(TaacConfig(**{**SMALL, "jit_compile": jit}), (3,), 1)
    learner.train(_batch(rng, 1, 3, 8, 1))  # Adam's moments are not zero from here on
    state = [v.numpy() for v in (*learner.actor.weights, *learner.critics.weights,
                                  learner.log_alpha_a, learner.log_alpha_b,
                                  *learner.actor_optimizer.variables,
                                  *learner.critic_optimizer.variables)]  # fmt: skip
    bad = _batch(rng, 2, 3, 8, 1)
    bad["reward"][:] = np.nan
    metrics = learner.train(bad)
    assert metrics["skipped"] == 1.0 and metrics["nonfinite_streak"] == 2.0
    after = [v.numpy() for v in (*learner.actor.weights, *learner.critics.weights,
                                  learner.log_alpha_a, learner.log_alpha_b,
                                  *learner.actor_optimizer.variables,
                                  *learner.critic_optimizer.variables)]  # fmt: skip
    for a, b in zip(state, after, strict=True):
        np.testing.assert_array_equal(a, b)
    assert learner.train(_batch(rng, 1, 3, 8, 1))["nonfinite_streak"] == 0.0


class _FailsOnce(gym.vector.VectorWrapper):
    """The evaluation's environment: raises on its first step, once."""

    failed = False

    def step(self, actions):
        if not _FailsOnce.failed:
            _FailsOnce.failed = True
            raise RuntimeError("evaluation env crashed")
        return self.env.step(actions)


def test_evaluation_retries_a_failing_environment(tmp_path):
    """TAAC evaluates with the runtime's Evaluator (it had its own loop, without retries)."""
    from tfagents_vtrace.envs import make_vector_env

    def factory(n, seed):
        env = make_vector_env("Pendulum-v1", n, seed, mode="sync")
        return _FailsOnce(env) if n == 3 else env  # 3: the evaluation's environments

    cfg = TaacConfig(initial_collect_steps=10, train_interval=2, **SMALL)
    run = RunConfig(env_id="Pendulum-v1", total_steps=20, num_envs=2, eval_episodes=3,
                    log_every_s=0.01, export_policy=False)  # fmt: skip
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.driver import train as drive

    _FailsOnce.failed = False
    final = drive(run, get_agent("taac"), cfg, None, str(tmp_path), env_factory=factory)
    assert _FailsOnce.failed and np.isfinite(final["eval_return"])
    assert final["eval_repeat_length"] >= 1.0


def train(run, cfg, network_config, logdir):
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.driver import train as drive

    return drive(run, get_agent("taac"), cfg, network_config, logdir)


def test_train_loop_checkpoints_replay_and_resumes(tmp_path):
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
    # tfv-export's path for TAAC: rebuilt from config.json + checkpoint, the same policy.
    from tfagents_vtrace.agents.taac import restore_policy

    trained = tf.saved_model.load(f"{logdir}/policy")
    rebuilt = tf.saved_model.load(export_policy(restore_policy(logdir), tmp_path / "re"))
    obs = np.random.default_rng(3).normal(size=(16, 3)).astype(np.float32)
    inputs = dict(observation=obs, first=np.ones(16, bool),
                  prev_action=np.zeros((16, 1), np.float32), prev_reward=np.zeros(16, np.float32),
                  state=trained.get_initial_state(batch_size=tf.constant(16)))  # fmt: skip
    want, got = trained.greedy_action(**inputs), rebuilt.greedy_action(**inputs)
    assert np.ptp(want["action"].numpy()) > 0  # trained weights, not a constant policy
    for key in ("action", "value", "p_b1"):
        np.testing.assert_array_equal(got[key].numpy(), want[key].numpy(), err_msg=key)
    run2 = RunConfig(**{**run.__dict__, "total_steps": 160, "export_policy": False})
    final2 = train(run2, cfg, None, logdir)
    assert final2["resumed"] and final2["step"] == 160
    assert final2["updates"] > final["updates"]
    rows = metrics_log.read_metrics(logdir)
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    # The same command again: the run already ended, so nothing is trained or written.
    again = train(run2, cfg, None, logdir)
    assert again["already_finished"] and again["step"] == 160
    assert again["updates"] == final2["updates"] and metrics_log.read_metrics(logdir) == rows


def test_interrupt_saves_checkpoint_and_replay_then_resumes(tmp_path, capsys):
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.driver import make_driver

    cfg = TaacConfig(initial_collect_steps=20, train_interval=2, **SMALL)
    run = RunConfig(env_id="Pendulum-v1", seed=2, total_steps=80, num_envs=2, eval_episodes=1,
                    log_every_s=0.01, export_policy=False)  # fmt: skip
    logdir = str(tmp_path / "run")
    trainer = make_driver(run, get_agent("taac"), cfg, None, logdir)
    learner = trainer.agent.learner
    train_once, calls = learner.train, []

    def interrupt_on_third_update(batches):
        calls.append(trainer.counters.env_steps)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return train_once(batches)

    learner.train = interrupt_on_third_update
    with pytest.raises(stop_signals.RunInterrupted) as caught:
        trainer.run()
    step = caught.value.step
    assert step == calls[-1] and 20 < step < 80 and int(learner.updates.numpy()) == 2
    assert caught.value.path.endswith(f"ckpt-{step}")
    assert tf.train.latest_checkpoint(f"{logdir}/checkpoints").endswith(f"ckpt-{step}")
    assert (tmp_path / "run" / "checkpoints" / f"replay-{step}.npz").exists()
    capsys.readouterr()
    final = train(run, cfg, None, logdir)
    assert final["resumed"] and final["step"] == 80 and final["updates"] > 2
    rows = metrics_log.read_metrics(logdir)
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert rows[-1]["step"] == 80 and "eval_return" in rows[-1] and rows[-1]["sps"] > 0
    assert "step=80 " in capsys.readouterr().err  # the final row is shown too


@pytest.mark.slow  # a private Ray and collector processes importing TensorFlow
def test_ray_collectors_train_resume_export_and_a_killed_one_is_replaced(tmp_path, ray_session):
    """Two collector processes (Ape-X style) fill the learner's replay, one stream each, and
    every collected call is followed by a training call; the run checkpoints (replay
    included), exports and resumes; a collector killed in the resumed run is replaced and
    counted in ``env_restarts``. (One test: each Ray launch costs seconds of imports.)"""
    import os

    _assert_actors_dead = ray_tests._assert_actors_dead
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.replay import storage
    from tfagents_vtrace.runtime.driver import make_driver

    cfg = TaacConfig(initial_collect_steps=80, train_interval=4, updates_per_train=2, **SMALL)
    logdir = str(tmp_path)

    def run(total, **kw):
        return RunConfig(env_id="Pendulum-v1", seed=3, total_steps=total, num_envs=1,
                         num_actors=2, eval_episodes=1, log_every_s=0.05, backend="ray",
                         **kw)  # fmt: skip

    trainer = make_driver(run(240), get_agent("taac"), cfg, None, logdir)
    final = trainer.run()
    source = trainer.agent.source
    assert final["step"] == 240 and final["env_restarts"] == 0
    assert final["updates"] == 2 * (240 - 80) // 4 + 2  # one training call per call
    assert source.worker_steps[0] > 0 and source.worker_steps[1] > 0
    assert final["replay_size"] == 240 and "eval_return" in final
    assert [s.size for s in trainer.agent.extra_state.streams] == [w for w in source.worker_steps]
    assert os.path.exists(os.path.join(logdir, "policy", "saved_model.pb"))
    archive = storage.replay_path(logdir, 240)
    assert storage.load_arrays(archive)[1]["num_streams"] == 2
    _assert_actors_dead(source)
    rows = metrics_log.read_metrics(logdir)
    assert rows and all(r["policy_lag"] >= 0 for r in rows)

    trainer = make_driver(run(480, export_policy=False), get_agent("taac"), cfg, None, logdir)
    seen = kill_worker_0_once(trainer, ray_session, after_env_steps=320)
    again = trainer.run()
    source = trainer.agent.source
    assert again["resumed"] and again["replay_restored"] == 240 and again["step"] == 480
    assert source.actor_restarts == [1, 0] and again["env_restarts"] == 1
    assert seen["new_pid"] != seen["pid"] and source.worker_steps[0] > seen["steps"]
    assert again["replay_size"] == 480 and again["updates"] > final["updates"] + 60
    _assert_actors_dead(source)


class _PendulumCostTerms(gym.Wrapper):
    """Pendulum-v1 with ALF-style vector rewards: ``info["reward_vector"]`` is
    ``-[theta^2, theta_dot^2, u^2]`` of the state the action was taken in, so weights
    ``(1, 0.1, 0.001)`` give back Pendulum's scalar reward."""

    def reset(self, **kwargs):
        self.last_obs, info = self.env.reset(**kwargs)
        return self.last_obs, info

    def step(self, action):
        cos, sin, theta_dot = self.last_obs
        u = float(np.clip(action, -2.0, 2.0)[0])
        obs, reward, terminated, truncated, info = self.env.step(action)
        info["reward_vector"] = -np.array([np.arctan2(sin, cos) ** 2, theta_dot**2, u**2])
        self.last_obs = obs
        return obs, reward, terminated, truncated, info


def _cost_terms_factory(n, seed):
    env = gym.vector.SyncVectorEnv(
        [lambda: _PendulumCostTerms(gym.make("Pendulum-v1")) for _ in range(n)],
        autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP,
    )
    env.reset(seed=seed)
    return env


def test_vector_reward_run_with_three_critic_replicas(tmp_path):
    """reward_dim = 3 (vector rewards in info, weighted back to Pendulum's reward) with three
    critic replicas: the replay holds the vectors, the run trains, evaluates and exports; a
    resume may not change the replicas or the reward dims (the checkpoint's shapes)."""
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.driver import make_driver

    weights = (1.0, 0.1, 0.001)
    cfg = TaacConfig(initial_collect_steps=20, train_interval=2, num_critic_replicas=3,
                     reward_dim=3, reward_weights=weights, **SMALL)  # fmt: skip
    run = RunConfig(env_id="Pendulum-v1", seed=3, total_steps=260, num_envs=2, eval_episodes=2,
                    log_every_s=0.01, export_policy=True)  # fmt: skip
    logdir = str(tmp_path / "run")
    driver = make_driver(run, get_agent("taac"), cfg, None, logdir, env_factory=_cost_terms_factory)
    final = driver.run()
    assert final["step"] == 260 and final["updates"] > 0 and np.isfinite(final["eval_return"])
    replay = driver.agent.extra_state
    rewards = replay.data["reward"][:, : replay.size]
    assert rewards.shape[-1] == 3
    # The stored vectors weigh back to Pendulum's reward (episode 1: the ep_return of 200 steps).
    episode = rewards[:, 1:201] @ np.array(weights)
    assert np.all(episode <= 0) and np.all(rewards[:, 1:201, 2] >= -4.0)  # u^2 <= 4
    assert driver.agent.learner.critics(np.zeros((1, 3)), np.zeros((1, 1, 1))).shape == (1, 9)
    loaded = tf.saved_model.load(f"{logdir}/policy")
    meta = json.loads(loaded.metadata.numpy().decode())
    assert meta["num_critic_replicas"] == 3 and meta["reward_weights"] == list(weights)
    from tfagents_vtrace.runtime.rundir import config_io, run_dir

    for change in (dict(num_critic_replicas=2), dict(reward_dim=1, reward_weights=None)):
        other = TaacConfig(**{**cfg.__dict__, **change})  # what experiments.train checks
        with pytest.raises(ValueError, match=f"agent_config.{next(iter(change))}"):
            run_dir.prepare_logdir(logdir, config_io.run_config_dict("taac", run, other, None))


def test_vector_reward_needs_the_info_vector_and_numbers_for_a_run(tmp_path):
    cfg = TaacConfig(initial_collect_steps=4, train_interval=2, reward_dim=2, **SMALL)
    run = RunConfig(env_id="Pendulum-v1", total_steps=20, num_envs=1, eval_episodes=1,
                    log_every_s=0.01, export_policy=False)  # fmt: skip
    with pytest.raises(ValueError, match=r"reward_dim: 2 needs.*reward_vector"):
        train(run, cfg, None, str(tmp_path / "a"))
    callable_cfg = TaacConfig(target_entropy=lambda spec: -1.0, **SMALL)
    with pytest.raises(ValueError, match="target_entropy: a run records its config"):
        train(run, callable_cfg, None, str(tmp_path / "b"))
