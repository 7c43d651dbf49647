"""The run driver's lifecycle, written once against a fake agent and run for every real one:
step-0 checkpoint, resume after a kill, the non-finite stop, Ctrl-C, finished runs, one set
of row fields, interval triggers."""

import contextlib
import json
import os
import time
import types

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.envs import env_spaces
from tfagents_vtrace.envs import failures as env_failures
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.replay import storage
from tfagents_vtrace.runtime.acting.policies import make_policy
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import NonFiniteLossError, make_driver
from tfagents_vtrace.runtime.rundir import run_dir, stop_signals
from tfagents_vtrace.runtime.rundir.config_io import dumps, run_config_dict
from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics
from tfagents_vtrace.runtime.rundir.triggers import IntervalTrigger

NET = NetworkConfig(hidden_sizes=(8,))
ROW_FIELDS = ("step", "wall_time", "sps", "episode_return", "episode_length", "episodes",
              "updates", "env_restarts", "policy_lag", "policy_lag_p50", "policy_lag_p95",
              "policy_lag_max")  # fmt: skip
FINAL_FIELDS = ("final", "step", "wall_time", "train_wall_time", "solve_wall_time",
                "solve_step", "eval_return", "train_sps", "train_cpu_ms_per_step", "updates",
                "episodes", "env_restarts",
                "resumed")  # fmt: skip


class FakeReplay:
    """Extra state: a list of numbers archived beside each checkpoint."""

    def __init__(self):
        self.items = []

    def save(self, path):
        storage.save_arrays(path, {"items": np.asarray(self.items, np.int64)})

    def load(self, path):
        self.items = storage.load_arrays(path)[0]["items"].tolist()

    def __len__(self):
        return len(self.items)


class FakeAgent:
    """Counts 10 steps and one update per iteration; ``nan_after`` iterations in, every
    update is skipped as non-finite."""

    lock = contextlib.nullcontext()

    def __init__(self, run, config, network_config, env_factory=None, strategy=None):
        del network_config, env_factory, strategy
        self.run_config, self.nan_after = run, config.get("nan_after")
        self.max_nonfinite_updates = config.get("max_nonfinite_updates", 3)
        env = gym.make(run.env_id)
        self.network = make_network(NET, env.observation_space, env.action_space)
        self.streak = tf.Variable(0, dtype=tf.int64)
        self.extra_state = FakeReplay()
        self.iterations, self.closed = 0, False

    def checkpoint_items(self):
        return {"network": self.network, "streak": self.streak}

    def start(self, counters):
        self.counters = counters

    def advance(self):
        self.iterations += 1
        bad = self.nan_after is not None and self.iterations > self.nan_after
        if not bad:
            for w in self.network.trainable_variables:
                w.assign_add(tf.fill(w.shape, 0.01))
        self.streak.assign(self.streak + 1 if bad else 0)
        self.extra_state.items.append(self.counters.env_steps)
        info = {"episode_returns": [1.0], "episode_lengths": [10], "actor_id": 0, "env_restarts": 0}
        self.counters.add(steps=10, updates=1, info=info, lag=0)
        return {"loss": np.nan if bad else 1.0, "nonfinite_streak": float(self.streak.numpy())}

    def get_weights(self):
        return self.network.get_weights()

    def set_weights(self, weights):
        self.network.set_weights(weights)

    def evaluation_policy(self):
        return make_policy(self.network, "numpy", greedy=True)

    def export(self, path):
        from tfagents_vtrace.export.saved_model import export_policy

        export_policy(self.network, path, overwrite=True)

    def row_fields(self, times):
        return {"fake": 1.0} if times is not None else {"fake_final": -np.inf}

    def close(self):
        self.closed = True


FAKE = types.SimpleNamespace(name="fake", run_agent=FakeAgent)


def _setup(agent: str, total_steps: int, **run_kw):
    """``(agent module, agent config, network config, run config)`` of a tiny run."""
    kw = dict(total_steps=total_steps, num_envs=2, unroll_length=5, num_actors=0,
              eval_episodes=1, log_every_s=0.01, export_policy=False)  # fmt: skip
    kw.update(run_kw)
    if agent == "fake":
        return FAKE, dict(kw.pop("fake", {})), NET, RunConfig(**kw)
    module = get_agent(agent.split("_")[0])
    max_bad = kw.pop("max_nonfinite_updates", 10)
    if agent in ("impala", "a2c"):
        split = {"num_minibatches": 2} if agent == "impala" else {}  # B = 2 environments
        config = module.Config(max_nonfinite_updates=max_bad, **split)
        return module, config, NET, RunConfig(**kw)
    if agent == "taac":
        config = module.Config(actor_hidden_sizes=(8,), critic_hidden_sizes=(8,),
                               mini_batch_size=4, mini_batch_length=2, jit_compile=False,
                               initial_collect_steps=10, train_interval=2,
                               max_nonfinite_updates=max_bad)  # fmt: skip
        return module, config, None, RunConfig(env_id="Pendulum-v1", **kw)
    if agent.startswith("acer"):  # acer: inline; acer_workers: two asynchronous workers
        workers = 2 if agent == "acer_workers" else 0
        config = module.Config(t_max=5, replay_start_size=10, n_times_replay=1,
                               num_workers=workers, max_nonfinite_updates=max_bad)  # fmt: skip
        net = module.network_config_for(NET, config, env_spaces("CartPole-v1"))
        return module, config, net, RunConfig(**kw)
    if agent == "a3c":
        config = module.Config(num_workers=2, t_max=5, max_nonfinite_updates=max_bad)
        return module, config, NET, RunConfig(**kw)
    raise ValueError(agent)


AGENTS = ["fake", "impala", "a2c", "taac", "acer", "acer_workers", "a3c"]


def _driver(agent, logdir, total_steps, **kw):
    env_factory, callbacks = kw.pop("env_factory", None), kw.pop("callbacks", None)
    module, config, net, run = _setup(agent, total_steps, **kw)
    return make_driver(
        run, module, config, net, str(logdir), env_factory=env_factory, callbacks=callbacks
    )


def _steps(logdir):
    return [row["step"] for row in read_metrics(str(logdir))]


class Killed(BaseException):
    """What a SIGKILL does to the loop: it stops, nothing is saved."""


def _kill(driver, after_checkpoint: bool):
    """Kills the run at its first iteration, or once it stepped past a checkpoint > 0."""
    advance, after = driver.agent.advance, []

    def advance_then_die():
        latest = driver.checkpointer.manager.latest_checkpoint
        if latest and int(latest.rsplit("-", 1)[1]) > 0:
            after.append(1)
        if not after_checkpoint or len(after) > 3:
            raise Killed
        return advance()

    driver.agent.advance = advance_then_die


@pytest.mark.parametrize("agent", AGENTS)
def test_a_run_killed_before_its_first_timed_checkpoint_resumes(tmp_path, agent):
    driver = _driver(agent, tmp_path, 400, checkpoint_every_s=3600)
    _kill(driver, after_checkpoint=False)
    with pytest.raises(Killed):
        driver.run()
    module, config, net, run = _setup(agent, 400, checkpoint_every_s=3600)
    config_json = run_config_dict(agent.split("_")[0], run, config, net)
    assert run_dir.prepare_logdir(str(tmp_path), config_json) == "resume"  # step-0 checkpoint
    final = _driver(agent, tmp_path, 400).run()
    assert final["resumed"] and final["step"] >= 400


@pytest.mark.parametrize("agent", AGENTS)
def test_a_killed_run_resumes_with_steps_strictly_increasing(tmp_path, agent):
    driver = _driver(agent, tmp_path, 10_000, checkpoint_every_s=0.01)
    _kill(driver, after_checkpoint=True)
    with pytest.raises(Killed):
        driver.run()
    saved = int(tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).rsplit("-", 1)[1])
    assert saved > 0
    before = [s for s in _steps(tmp_path) if s <= saved]
    final = _driver(agent, tmp_path, saved + 200).run()
    assert final["resumed"] and final["step"] >= saved + 200
    steps = _steps(tmp_path)
    assert all(a < b for a, b in zip(steps, steps[1:])), steps
    assert [s for s in steps if s <= saved] == before and steps[-1] == final["step"]


class HugeRewards(gym.vector.VectorWrapper):
    """Finite rewards of 1e30: the squared value errors overflow float32, so the loss is
    non-finite while every environment output passes the actor's finiteness checks."""

    def step(self, actions):
        obs, reward, terminated, truncated, info = self.env.step(actions)
        return obs, np.full_like(reward, 1e30, dtype=np.float64), terminated, truncated, info


class AlwaysFailing(gym.vector.VectorWrapper):
    def step(self, actions):
        raise RuntimeError("simulated environment crash")


def _wrapped_factory(agent, wrapper):
    env_id = "Pendulum-v1" if agent == "taac" else "CartPole-v1"

    def factory(n, seed):
        from tfagents_vtrace.envs import make_vector_env

        return wrapper(make_vector_env(env_id, n, seed, mode="sync"))

    return factory


def _nan_factory(agent):
    return _wrapped_factory(agent, HugeRewards)


@pytest.mark.parametrize("agent", AGENTS[1:])
def test_an_always_failing_env_ends_the_run_with_one_line(tmp_path, agent, monkeypatch):
    monkeypatch.setattr(env_failures, "BACKOFF_S", 0.01)  # the waits, not the cap, shrink
    driver = _driver(agent, tmp_path, 10_000, env_factory=_wrapped_factory(agent, AlwaysFailing))
    start = time.monotonic()
    with pytest.raises(env_failures.EnvFailure) as error:
        driver.run()
    assert time.monotonic() - start < 60
    message = str(error.value)
    assert "\n" not in message and "RuntimeError: simulated environment crash" in message
    if agent != "taac":  # TAAC does not recreate its env; the others try MAX_CONSECUTIVE times
        assert f"failed {env_failures.MAX_CONSECUTIVE + 1} times in a row" in message
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))  # the work is kept


@pytest.mark.parametrize("agent", AGENTS)
def test_non_finite_updates_stop_the_run_with_the_last_good_weights(tmp_path, agent):
    if agent == "fake":
        driver = _driver(agent, tmp_path, 10_000, fake={"nan_after": 2})
    else:
        kw = dict(max_nonfinite_updates=3, env_factory=_nan_factory(agent))
        driver = _driver(agent, tmp_path, 10_000, **kw)
    network = driver.agent.checkpoint_items()["network"]
    with pytest.raises(NonFiniteLossError, match="consecutive updates") as error:
        driver.run()
    # Asynchronous workers may add a few before the driver looks.
    assert int(str(error.value).split()[0]) >= 3
    good = network.get_weights()
    checkpoint = tf.train.Checkpoint(network=network)
    for w in network.weights:
        w.assign(tf.zeros_like(w))
    latest = tf.train.latest_checkpoint(str(tmp_path / "checkpoints"))
    checkpoint.restore(latest).expect_partial()
    for a, b in zip(good, network.get_weights()):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("agent", AGENTS)
def test_a_stop_request_saves_and_the_same_command_resumes(tmp_path, agent):
    driver = _driver(agent, tmp_path, 10_000)
    advance, calls = driver.agent.advance, []

    def advance_then_request():  # what a signal handler does while an iteration runs
        calls.append(1)
        if len(calls) == 3:
            stop_signals.request_stop()
        return advance()

    driver.agent.advance = advance_then_request
    with pytest.raises(stop_signals.RunInterrupted) as info:
        driver.run()
    step = info.value.step
    assert step == driver.counters.env_steps > 0 and info.value.path.endswith(f"ckpt-{step}")
    assert not stop_signals.stop_requested()
    final = _driver(agent, tmp_path, step + 100).run()
    assert final["resumed"] and final["step"] >= step + 100


@pytest.mark.parametrize("agent", AGENTS)
def test_rows_and_final_row_have_the_same_fields_for_every_agent(tmp_path, agent):
    final = _driver(agent, tmp_path, 300, eval_every=100, export_policy=True).run()
    rows = read_metrics(str(tmp_path))
    assert rows and all(field in row for row in rows for field in ROW_FIELDS), rows
    assert [r["step"] for r in rows if "eval_return" in r][-1] == final["step"]
    assert all(field in final for field in FINAL_FIELDS), final
    with open(tmp_path / "final.json") as f:
        assert json.load(f) == json.loads(dumps(final))
    assert (tmp_path / "policy" / "saved_model.pb").exists()
    again = _driver(agent, tmp_path, 300, eval_every=100).run()  # the run already ended
    assert again["already_finished"] and read_metrics(str(tmp_path)) == rows


@pytest.mark.parametrize("agent", ["fake", "taac", "acer", "acer_workers"])  # with a replay
def test_extra_state_is_archived_before_its_checkpoint_and_restored(tmp_path, caplog, agent):
    driver = _driver(agent, tmp_path, 100)
    order, save = [], driver.agent.extra_state.save
    driver.agent.extra_state.save = lambda path: order.append("replay") or save(path)
    driver.checkpointer.manager.save = _before(order, driver.checkpointer.manager.save)
    final = driver.run()
    assert order[:2] == ["replay", "checkpoint"] and order == ["replay", "checkpoint"] * 2
    archive = storage.replay_path(str(tmp_path), final["step"])
    assert os.path.exists(archive) and final["replay_size"] == len(driver.agent.extra_state) > 0
    resumed = _driver(agent, tmp_path, 200)
    assert resumed.extra_restored == final["replay_size"] == len(resumed.agent.extra_state)
    os.remove(archive)
    with caplog.at_level("WARNING"):
        missing = _driver(agent, tmp_path, 200)
    assert missing.extra_restored == 0 and "no replay archive" in caplog.text


def test_a_checkpoint_and_its_archive_share_one_step_while_workers_count(tmp_path):
    """ACER's save read the step twice: an archive and a checkpoint of different steps, then
    prune_replays deleted the archive. The driver reads the counters once per save."""
    driver = _driver("fake", tmp_path, 100, checkpoint_every_s=0.01)
    save = driver.agent.extra_state.save

    def save_while_a_worker_counts(path):
        save(path)
        driver.counters.add(steps=1)

    driver.agent.extra_state.save = save_while_a_worker_counts
    driver.run()
    kept = [p.rsplit("-", 1)[1] for p in driver.checkpointer.manager.checkpoints]
    assert len(kept) == 3
    for step in kept:
        assert os.path.exists(storage.replay_path(str(tmp_path), int(step))), step


def test_a_start_killed_before_its_prune_leaves_no_archive_behind(tmp_path):
    """Killed between a checkpoint and the prune after it, a run kept the archive of a step
    whose checkpoint max_to_keep had dropped; the next start ran to the end without saving
    again, so nothing pruned it (benchmarks/chaos_lib.py's retention check)."""
    final = _driver("fake", tmp_path, 100, checkpoint_every_s=0.01).run()
    checkpoints = tmp_path / "checkpoints"
    archive = storage.replay_path(str(tmp_path), final["step"])
    (checkpoints / "replay-1.npz").write_bytes(open(archive, "rb").read())  # a dropped step
    (checkpoints / "replay-2.tmp.npz").write_bytes(b"x")  # a killed archive write
    resumed = _driver("fake", tmp_path, 100)  # the next start, at the run's last step
    kept = resumed.checkpointer.steps()
    assert len(kept) == 3 and final["step"] in kept
    archives = sorted(p.name for p in checkpoints.glob("replay-*"))
    assert archives == sorted(f"replay-{step}.npz" for step in kept)


def _before(order, save):
    def checkpoint(*args, **kwargs):
        order.append("checkpoint")
        return save(*args, **kwargs)

    return checkpoint


def test_final_json_is_strict_json(tmp_path):
    final = _driver("fake", tmp_path, 50).run()
    text = (tmp_path / "final.json").read_text()
    assert "Infinity" not in text and json.loads(text)["fake_final"] is None
    assert final["fake_final"] == -np.inf  # the row train prints goes through config_io.dumps


def test_multi_worker_checkpoints_follow_steps_without_an_eval_schedule(tmp_path, monkeypatch):
    from tfagents_vtrace.runtime import strategy as strategy_lib

    chief = strategy_lib.WorkerRole("worker", 0, True)  # worker 0 of a cluster, the chief
    monkeypatch.setattr(strategy_lib, "worker_role", lambda s: chief)
    driver = _driver("fake", tmp_path, 1000, checkpoint_every_s=3600, eval_every=0)
    saves = []
    save = driver.save
    driver.save = lambda: saves.append(driver.counters.env_steps) or save()
    driver.run()
    assert saves == [0, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]


def test_interval_trigger_fires_once_per_multiple_reached():
    trigger = IntervalTrigger(100, start=130)
    fired = [step for step in (150, 199, 200, 250, 420, 430, 500) if trigger(step)]
    assert fired == [200, 420, 500]  # 300 and 400 were passed at once: one evaluation
    assert not any(IntervalTrigger(0)(step) for step in range(0, 1000, 100))


def test_eval_rows_follow_the_trigger(tmp_path):
    driver = _driver("fake", tmp_path, 500, eval_every=70)
    driver.run()
    evals = [r["step"] for r in read_metrics(str(tmp_path)) if "eval_return" in r]
    assert evals == [70, 140, 210, 280, 350, 420, 490, 500]


def test_checkpoint_items_need_a_network(tmp_path):
    from tfagents_vtrace.runtime.driver import Driver

    driver = _driver("fake", tmp_path / "a", 10)
    agent = driver.agent
    agent.checkpoint_items = lambda: {"streak": agent.streak}
    with pytest.raises(ValueError, match="network"):
        Driver(driver.run_config, agent, str(tmp_path / "b"), {})


def test_background_evaluations_follow_the_trigger_and_name_their_weights_step(tmp_path):
    driver = _driver("fake", tmp_path, 500, eval_every=70, eval_background=True)
    final = driver.run()
    rows = [r for r in read_metrics(str(tmp_path)) if "eval_return" in r]
    # the trigger's steps; the last (500) is the final evaluation, in the loop
    assert [r.get("eval_step", r["step"]) for r in rows] == [70, 140, 210, 280, 350, 420, 490, 500]
    assert all(r["eval_step"] <= r["step"] for r in rows[:-1])
    assert final["step"] == 500 and final["solve_step"] is None


def test_a_callback_stops_at_a_background_evaluation_row(tmp_path):
    driver = _driver(
        "fake", tmp_path, 100_000, eval_every=50, eval_background=True,
        callbacks=[lambda row: "eval_return" in row],
    )  # fmt: skip
    final = driver.run()
    rows = read_metrics(str(tmp_path))
    stop, last = [r for r in rows if "eval_return" in r]  # the stop's and the final one
    # The stop's row evaluated older weights (eval_step): the final evaluation is of the
    # weights at the stop, at the same step, and nothing trained after it.
    assert stop["eval_step"] < stop["step"] == last["step"] == final["step"] < 100_000
    assert rows[-1] == last and "eval_step" not in last
    assert final["stopped_by"] == "callback" and final["eval_return"] == last["eval_return"]


def test_callbacks_are_refused_on_a_multi_worker_cluster(tmp_path, monkeypatch):
    from tfagents_vtrace.runtime import strategy as strategy_lib

    chief = strategy_lib.WorkerRole("worker", 0, True)
    monkeypatch.setattr(strategy_lib, "worker_role", lambda s: chief)
    with pytest.raises(ValueError, match=r"^callbacks: not on a multi-worker cluster"):
        _driver("fake", tmp_path, 100, callbacks=[print])


def test_a_background_evaluation_that_solves_restores_the_weights_it_evaluated(tmp_path):
    driver = _driver(
        "fake", tmp_path, 100_000, eval_every=50, eval_background=True, stop_return=-1.0
    )  # fmt: skip  (any return solves)
    before = driver.agent.network.get_weights()
    advance = driver.agent.advance

    def slow_advance():  # the learner moves on while the evaluation plays
        time.sleep(0.002)
        return advance()

    driver.agent.advance = slow_advance
    final = driver.run()
    solve_step = final["solve_step"]
    assert solve_step == 50 and final["step"] > solve_step  # collected one advance later at least
    # the fake agent adds 0.01 to every weight per 10 steps
    for w0, w in zip(before, driver.agent.network.get_weights(), strict=True):
        np.testing.assert_allclose(w, w0 + 0.01 * solve_step / 10, rtol=1e-5, atol=1e-5)
    row = [r for r in read_metrics(str(tmp_path)) if "eval_return" in r][0]
    assert row["eval_step"] == 50 and row["step"] == final["step"]


def test_background_evaluations_need_a_single_process_and_no_determinism(tmp_path):
    with pytest.raises(ValueError, match="eval_background"):
        RunConfig(eval_background=True, deterministic=True)
    with pytest.raises(ValueError, match="eval_background"):
        RunConfig(eval_background=1)
