"""A3C: no update lost under concurrency, interleaving workers and the global step counter,
entropy annealing over global steps, config validation, a run directory from train(), and
the workers as Ray processes (``--backend=ray``; skipped without Ray)."""

import json
import os
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.ray_kill import kill_worker_0_once
from tests.runtime import test_ray_backend as ray_tests
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.a3c import A3CConfig, SharedOptimizer
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver

A3C = get_agent("a3c")
ray_session = ray_tests.ray_session  # one local Ray per module (skips without Ray)
_assert_actors_dead = ray_tests._assert_actors_dead


def a3c_driver(run, config, net, logdir, **kwargs):
    return make_driver(run, A3C, config, net, logdir, **kwargs)


def train(run, config, net, logdir):
    return a3c_driver(run, config, net, logdir).run()


@pytest.mark.parametrize("field,value", [("num_workers", 0), ("t_max", 0), ("gae_lambda", -1)])
def test_bad_config_value_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        A3CConfig(**{field: value})


def test_no_update_is_lost_under_concurrency():
    """N threads x K updates of a constant gradient 1 move the variable by exactly N*K*lr."""
    n, k, lr = 4, 40, 0.125  # a power of two: every partial sum is exact in float32
    var = tf.Variable([100.0, -3.0])
    shared = SharedOptimizer([var], keras.optimizers.SGD(learning_rate=lr), record_order=True)
    grad = [tf.constant([1.0, -1.0])]
    barrier = threading.Barrier(n)

    def work(i):
        barrier.wait()  # start together to maximise contention
        for _ in range(k):
            shared.apply(grad, num_steps=3, caller=i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_array_equal(var.numpy(), [100.0 - n * k * lr, -3.0 + n * k * lr])
    assert shared.step == n * k * 3 and shared.updates == n * k
    assert sorted(shared.order) == sorted(list(range(n)) * k)


def _numpy_adam(lr=0.1, b1=0.9, b2=0.999, eps=1e-7):
    """Adam (Kingma & Ba, Algorithm 1, with epsilon added to sqrt(v_hat) as Keras and the
    fork's tf.train.AdamOptimizer do): ``step(theta, g)`` returns the new theta."""
    state = {"m": 0.0, "v": 0.0, "t": 0}

    def step(theta, g):
        state["t"] += 1
        state["m"] = b1 * state["m"] + (1 - b1) * g
        state["v"] = b2 * state["v"] + (1 - b2) * g * g
        m_hat = state["m"] / (1 - b1 ** state["t"])
        v_hat = state["v"] / (1 - b2 ** state["t"])
        return theta - lr * m_hat / (np.sqrt(v_hat) + eps)

    return step


@pytest.mark.parametrize("shared_state", [False, True])
def test_worker_optimizers_keep_their_own_adam_statistics(shared_state):
    """The fork gives each worker its own Adam over the global weights (default); with
    ``shared_optimizer=True`` one Adam sees every worker's gradients."""
    var = tf.Variable([0.5, -2.0], dtype=tf.float64)
    config = A3CConfig(num_workers=2, optimizer="adam", learning_rate=0.1, adam_epsilon=1e-7,
                       shared_optimizer=shared_state)  # fmt: skip
    from tfagents_vtrace.agents import optimization

    make = lambda: optimization.optimizer_from_config(config, None)  # noqa: E731
    own = {} if shared_state else {0: make(), 1: make()}
    shared = SharedOptimizer([var], make(), caller_optimizers=own)
    updates = [(0, [1.0, -0.5]), (1, [-3.0, 0.25]), (0, [0.5, 0.5]), (0, [2.0, -1.0]),
               (1, [1.0, 1.0])]  # fmt: skip
    steps = {0: _numpy_adam(), 1: _numpy_adam()} if not shared_state else None
    one = _numpy_adam()
    theta = np.array([0.5, -2.0])
    for caller, g in updates:
        shared.apply([tf.constant(g, tf.float64)], num_steps=1, caller=caller)
        theta = (steps[caller] if steps else one)(theta, np.array(g))
        np.testing.assert_allclose(var.numpy(), theta, rtol=1e-4, atol=1e-6)  # float32 betas


def test_a3c_reference_preset_follows_the_meta_rl_fork():
    from tfagents_vtrace.api import make_configs

    configs = make_configs(flagfile="a3c_reference")
    config = configs.agent_config
    assert configs.agent == "a3c"
    assert not config.shared_optimizer
    assert (config.value_target, config.loss_reduction) == ("nstep", "sum")
    assert (config.gae_lambda, config.t_max) == (1.0, 20)
    assert configs.network_config.time_step_scale == 1.0  # the fork feeds the raw step
    assert NetworkConfig().time_step_scale == 1.0
    with pytest.raises(ValueError, match="shared_optimizer"):
        A3CConfig(shared_optimizer="yes")


def test_workers_interleave_and_global_step_is_the_sum_of_worker_steps(tmp_path):
    import tfagents_vtrace.envs  # noqa: F401

    run = RunConfig(
        env_id="CartPole-v1", total_steps=1200, num_envs=2, eval_episodes=2,
        export_policy=False, log_every_s=0.05,
    )  # fmt: skip
    config = A3CConfig(num_workers=3, t_max=5, entropy_cost=0.05, entropy_cost_end=0.0)
    trainer = a3c_driver(
        run, config, NetworkConfig(hidden_sizes=(16,)), str(tmp_path), record_order=True
    )
    final = trainer.run()
    shared = trainer.agent.learner.shared
    worker_steps = [w.steps for w in trainer.agent.workers]
    assert final["worker_steps"] == worker_steps
    assert shared.step == sum(worker_steps) == final["step"] >= run.total_steps
    assert shared.step - run.total_steps < 10  # overshoot < one rollout (t_max * num_envs)
    assert shared.updates == sum(w.updates for w in trainer.agent.workers) == len(shared.order)
    order = shared.order
    for i in range(config.num_workers):  # every worker updated while the others did
        mine = [j for j, c in enumerate(order) if c == i]
        others = [j for j, c in enumerate(order) if c != i]
        assert mine and others and mine[0] < others[-1] and others[0] < mine[-1]
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches >= config.num_workers
    # The entropy weight is annealed over the global step and hits its end value.
    assert trainer.agent.learner.entropy_coef(run.total_steps) == 0.0
    assert trainer.agent.learner.entropy_coef(run.total_steps // 2) == pytest.approx(0.025)
    rows = [json.loads(line) for line in open(os.path.join(tmp_path, "metrics.jsonl"))]
    assert rows[-1]["step"] == final["step"] and "eval_return" in rows[-1]


def test_train_writes_a_resumable_run_directory_and_policy(tmp_path):
    import tfagents_vtrace.envs  # noqa: F401

    net = NetworkConfig(hidden_sizes=(), core="lstm", lstm_size=8, use_prev_action=True,
                        use_prev_reward=True, use_time_step=True)  # fmt: skip
    config = A3CConfig(num_workers=2, t_max=10, discount=0.9)
    run = RunConfig(env_id="BanditDependentUniform-v0", total_steps=200, num_envs=2,
                    eval_episodes=2, log_every_s=0.05)  # fmt: skip
    final = train(run, config, net, str(tmp_path))
    assert final["final"] and final["step"] >= 200 and not final["resumed"]
    assert os.path.exists(os.path.join(tmp_path, "policy", "saved_model.pb"))
    saved = json.load(open(os.path.join(tmp_path, "config.json")))
    assert saved["agent"] == "a3c" and saved["agent_config"]["t_max"] == 10
    longer = RunConfig(**{**run.__dict__, "total_steps": 300, "export_policy": False})
    again = train(longer, config, net, str(tmp_path))
    assert again["resumed"] and again["step"] >= 300
    assert sum(again["worker_steps"]) == again["step"] - final["step"]


def test_stop_return_keeps_the_evaluated_weights(tmp_path):
    import tfagents_vtrace.envs  # noqa: F401

    run = RunConfig(
        env_id="CartPole-v1", total_steps=100_000, num_envs=2, eval_every=200, eval_episodes=2,
        stop_return=0.0, export_policy=False,
    )  # fmt: skip
    trainer = a3c_driver(run, A3CConfig(num_workers=2, t_max=5), NetworkConfig(hidden_sizes=(8,)),
                         str(tmp_path))  # fmt: skip
    final = trainer.run()
    assert final["solve_wall_time"] is not None and 200 <= final["solve_step"] <= final["step"]
    assert final["step"] < 2_000  # the workers stopped soon after the solving evaluation
    for a, b in zip(trainer.agent.learner.network.get_weights(), trainer.eval_weights):
        np.testing.assert_array_equal(a, b)  # continued updates were rolled back


def test_deterministic_is_refused_with_ray_in_one_line():
    with pytest.raises(ValueError, match="^deterministic: not available with backend='ray'"):
        RunConfig(backend="ray", deterministic=True)


def _ray_run(total_steps, **kw):
    return RunConfig(env_id="CartPole-v1", total_steps=total_steps, num_envs=2, eval_episodes=2,
                     log_every_s=0.05, backend="ray", **kw)  # fmt: skip


RAY_NET = NetworkConfig(hidden_sizes=(16,))


@pytest.mark.slow  # a private Ray and worker processes importing TensorFlow
def test_ray_workers_train_resume_export_and_a_killed_worker_is_replaced(tmp_path, ray_session):
    """Two worker processes return gradients that the driver applies in arrival order; the
    run directory checkpoints, exports and resumes as with threads; a worker process killed
    in the resumed run is replaced and counted in ``env_restarts``. (One test: each Ray
    launch costs seconds of TensorFlow imports.)"""

    import tfagents_vtrace.envs  # noqa: F401
    from tfagents_vtrace.runtime.rundir import metrics_log

    config = A3CConfig(num_workers=2, t_max=5)
    trainer = a3c_driver(_ray_run(1500), config, RAY_NET, str(tmp_path), record_order=True)
    final = trainer.run()
    shared, source = trainer.agent.learner.shared, trainer.agent.source
    assert 1500 <= final["step"] < 1510 and final["env_restarts"] == 0
    assert shared.step == sum(final["worker_steps"]) == final["step"] == 10 * shared.updates
    assert set(shared.order) == {0, 1} and final["episodes"] > 0 and final["eval_return"] > 0
    assert os.path.exists(os.path.join(tmp_path, "policy", "saved_model.pb"))
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith(f"ckpt-{shared.step}")
    _assert_actors_dead(source)
    rows = metrics_log.read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert all(r["policy_lag"] >= 0 for r in rows) and max(r["policy_lag"] for r in rows) > 0

    trainer = a3c_driver(_ray_run(3000, export_policy=False), config, RAY_NET, str(tmp_path))
    seen = kill_worker_0_once(trainer, ray_session, after_env_steps=final["step"] + 400)
    again = trainer.run()
    source = trainer.agent.source
    assert again["resumed"] and 3000 <= again["step"] < 3010
    assert sum(again["worker_steps"]) == again["step"] - final["step"]
    assert source.actor_restarts == [1, 0] and again["env_restarts"] == 1
    assert seen["new_pid"] != seen["pid"]
    assert again["worker_steps"][0] > seen["steps"]  # the replacement contributed
    _assert_actors_dead(source)


def test_interrupt_saves_a_checkpoint_resume_bounds_the_overshoot_then_finished(tmp_path, capsys):
    """Ctrl-C (a KeyboardInterrupt in the watching thread) stops the workers and saves;
    re-running resumes and ends within one rollout of total_steps; a third run is a no-op."""
    import tfagents_vtrace.envs  # noqa: F401
    from tfagents_vtrace.runtime.rundir import metrics_log, stop_signals

    # 2 workers x (t_max 5 x 2 envs): 10-step rollouts; 605 is not a multiple of 10.
    run = RunConfig(env_id="CartPole-v1", total_steps=605, num_envs=2, eval_episodes=2,
                    export_policy=False, log_every_s=0.05)  # fmt: skip
    config, net = A3CConfig(num_workers=2, t_max=5), NetworkConfig(hidden_sizes=(8,))
    trainer = a3c_driver(run, config, net, str(tmp_path))
    advance = trainer.agent.advance

    def interrupt_after_100_steps():
        if trainer.agent.learner.shared.step >= 100:
            raise KeyboardInterrupt
        return advance()

    trainer.agent.advance = interrupt_after_100_steps
    with pytest.raises(stop_signals.RunInterrupted) as caught:
        trainer.run()
    assert not any(t.is_alive() for t in trainer.agent.source.threads)
    step = trainer.agent.learner.shared.step
    assert caught.value.step == step and 100 <= step < run.total_steps
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith(f"ckpt-{step}")
    capsys.readouterr()

    final = train(run, config, net, str(tmp_path))
    assert final["resumed"] and sum(final["worker_steps"]) == final["step"] - step
    # Rollouts are claimed from the budget: the total stops within one rollout (10 steps).
    assert run.total_steps <= final["step"] < run.total_steps + 10
    rows = metrics_log.read_metrics(str(tmp_path))
    steps = [r["step"] for r in rows]
    assert steps == sorted(set(steps)) and steps[-1] == final["step"] and steps[0] > 0
    assert all(r["sps"] > 0 for r in rows)  # a row only after the global step moved
    assert "eval_return" in rows[-1]
    assert f"step={final['step']} " in capsys.readouterr().err  # the last row is shown too

    again = train(run, config, net, str(tmp_path))
    assert again["already_finished"] and again["step"] == final["step"]
    assert metrics_log.read_metrics(str(tmp_path)) == rows


def test_checkpoints_are_written_under_the_shared_lock(tmp_path):
    """A3C saved while workers applied updates, without the lock: a torn checkpoint."""
    import tfagents_vtrace.envs  # noqa: F401

    run = RunConfig(env_id="CartPole-v1", total_steps=300, num_envs=2, eval_episodes=1,
                    export_policy=False, checkpoint_every_s=0.05)  # fmt: skip
    trainer = a3c_driver(run, A3CConfig(num_workers=2, t_max=5), NetworkConfig(hidden_sizes=(8,)),
                         str(tmp_path))  # fmt: skip
    lock, held = trainer.agent.learner.shared.lock, []
    save = trainer.checkpointer.manager.save

    def probe():  # another thread (a worker) tries to update meanwhile
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        held.append(not got)

    def save_probing(*args, **kwargs):
        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()
        return save(*args, **kwargs)

    trainer.checkpointer.manager.save = save_probing
    trainer.run()
    assert len(held) >= 2 and all(held)
