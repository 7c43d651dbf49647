"""ACER agent: config validation, Q heads from the action space, the learner's average
network, discrete / continuous / recurrent train steps, sync and async training into a run
directory, export, a replay that survives SIGKILL + resume, and the workers as Ray processes
(``--backend=ray``; skipped without Ray)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from tests.runtime import test_ray_backend as ray_tests
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.agents.acer import AcerConfig, AcerLearner, network_config_for
from tfagents_vtrace.envs import env_spaces
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.replay import storage
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, build_network
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver
from tfagents_vtrace.runtime.rundir import metrics_log, stop_signals

ray_session = ray_tests.ray_session  # one local Ray per module (skips without Ray)
_assert_actors_dead = ray_tests._assert_actors_dead

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "field,value",
    [("trust_region_alpha", 1.0), ("truncation_threshold", -1.0), ("t_max", 0),
     ("trust_region_delta", 0.0), ("n_times_replay", -1), ("optimizer", "sgd")],
)  # fmt: skip
def test_bad_config_value_names_the_field(field, value):
    with pytest.raises(ValueError, match=field):
        AcerConfig(**{field: value})


@pytest.mark.parametrize("text,want", [("None", None), ("none", None), ("2.5", 2.5), (3, 3.0)])
def test_truncation_threshold_from_flag_text(text, want):
    assert AcerConfig(truncation_threshold=text).truncation_threshold == want


def test_q_head_follows_the_action_space():
    base = NetworkConfig()
    assert network_config_for(base, AcerConfig(), env_spaces("CartPole-v1")).q_head == "discrete"
    assert (
        network_config_for(base, AcerConfig(), env_spaces("Pendulum-v1")).q_head
        == "stochastic_dueling"
    )


def _batch(env_id, net_cfg, t=5, b=3, seed=0):
    network = build_network(net_cfg, env_id)
    spec = ActorSpec(env_id, net_cfg, num_envs=b, unroll_length=t, seed=seed, policy_impl="tf")
    actor = Actor(spec, 0, network)
    batch, _ = actor.unroll()
    actor.close()
    return batch


@pytest.mark.parametrize("env_id,core", [("CartPole-v1", None), ("Pendulum-v1", "lstm")])
def test_train_step_and_average_network(env_id, core):
    """Discrete Q head; Gaussian policy + stochastic dueling Q through the LSTM core."""
    net_cfg = network_config_for(
        NetworkConfig(hidden_sizes=(16,), core=core, lstm_size=8), AcerConfig(), env_spaces(env_id)
    )
    alpha = 0.9
    cfg = AcerConfig(trust_region_alpha=alpha, learning_rate=1e-2)
    learner = AcerLearner(cfg, lambda: build_network(net_cfg, env_id))
    batch = _batch(env_id, net_cfg)
    for v in learner.average_network.weights:  # a distinct average to check the update rule
        v.assign(v + 0.5)
    avg_before = [v.numpy() for v in learner.average_network.weights]
    metrics = learner.train_step(batch)
    assert all(np.isfinite(v) for v in metrics.values()), metrics
    assert metrics["skipped"] == 0.0
    for key in ("average_value", "average_entropy", "average_kl"):
        assert key in metrics
    assert metrics["kl"] > 0.0  # the average network differs from the policy
    for avg0, avg, theta in zip(
        avg_before, learner.average_network.weights, learner.network.weights
    ):
        np.testing.assert_allclose(
            avg.numpy(), alpha * avg0 + (1 - alpha) * theta.numpy(), 1e-5, 1e-6
        )


def test_learner_rejects_multi_replica_strategies():
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with pytest.raises(ValueError, match="strategy"):
        AcerLearner(AcerConfig(), lambda: None, strategy=strategy)


def _run(total_steps, **kw):
    return RunConfig(
        env_id=kw.pop("env_id", "CartPole-v1"), total_steps=total_steps, num_envs=4,
        eval_episodes=2, eval_every=kw.pop("eval_every", 0), log_every_s=0.5, **kw,
    )  # fmt: skip


def train(run, cfg, net_cfg, logdir):
    return make_driver(run, get_agent("acer"), cfg, net_cfg, logdir).run()


@pytest.mark.parametrize("workers", [0, 2])
def test_training_writes_the_run_directory(tmp_path, workers):
    cfg = AcerConfig(t_max=5, replay_start_size=20, n_times_replay=2, num_workers=workers)
    net_cfg = network_config_for(NetworkConfig(hidden_sizes=(16,)), cfg, env_spaces("CartPole-v1"))
    final = train(_run(400, export_policy=workers == 0), cfg, net_cfg, str(tmp_path))
    assert final["final"] and final["step"] >= 400
    assert final["replay_size"] > 0
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert "eval_return" in rows[-1]
    for key in ("average_value", "average_entropy", "average_kl", "q_loss", "pi_loss"):
        assert key in rows[-1], key
    assert final["updates"] > 400 // 20  # replay updates happened beside on-policy ones
    assert storage.latest_replay_path(str(tmp_path), final["step"]) is not None
    if workers == 0:  # the export contract: plain TF loads and steps the policy
        policy = tf.saved_model.load(str(tmp_path / "policy"))
        state = policy.get_initial_state(batch_size=tf.constant(2))
        out = policy.greedy_action(
            observation=tf.zeros([2, 4]), first=tf.ones([2], tf.bool),
            prev_action=tf.zeros([2], tf.int32), prev_reward=tf.zeros([2]), state=state,
        )  # fmt: skip
        assert out["action"].shape == (2,)
    # The same command again: the run already ended, so nothing is trained or written.
    rows_before = metrics_log.read_metrics(str(tmp_path))
    again = train(_run(400, export_policy=workers == 0), cfg, net_cfg, str(tmp_path))
    assert again["already_finished"] and again["step"] == final["step"]
    assert metrics_log.read_metrics(str(tmp_path)) == rows_before


def test_interrupt_stops_the_workers_saves_and_resumes(tmp_path, capsys):
    """Ctrl-C in the watching thread (async, 2 workers): workers stopped, checkpoint + replay
    saved at the interrupted step, RunInterrupted; the same command resumes and finishes."""
    cfg = AcerConfig(t_max=5, replay_start_size=20, n_times_replay=1, num_workers=2)
    net_cfg = network_config_for(NetworkConfig(hidden_sizes=(8,)), cfg, env_spaces("CartPole-v1"))
    run = _run(300, export_policy=False)
    trainer = make_driver(run, get_agent("acer"), cfg, net_cfg, str(tmp_path))
    advance = trainer.agent.advance

    def interrupt_at_100():
        if trainer.counters.env_steps >= 100:
            raise KeyboardInterrupt
        return advance()

    trainer.agent.advance = interrupt_at_100
    with pytest.raises(stop_signals.RunInterrupted) as caught:
        trainer.run()
    step = caught.value.step
    assert 100 <= step < 300 and step == trainer.counters.env_steps
    assert tf.train.latest_checkpoint(str(tmp_path / "checkpoints")).endswith(f"ckpt-{step}")
    saved_replay = storage.load_arrays(storage.replay_path(str(tmp_path), step))[1]["size"]
    assert saved_replay > 0
    capsys.readouterr()
    final = train(run, cfg, net_cfg, str(tmp_path))
    assert final["resumed"] and final["replay_restored"] == saved_replay
    assert 300 <= final["step"] < 300 + 20  # iterations are claimed from one step budget
    rows = metrics_log.read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert rows[-1]["step"] == final["step"] and "eval_return" in rows[-1]
    assert f"step={final['step']} " in capsys.readouterr().err  # the final row is shown too


@pytest.mark.slow  # two subprocesses importing TensorFlow (~40 s on a loaded machine)
def test_replay_survives_sigkill_and_resume(tmp_path):
    logdir = tmp_path / "run"
    args = [
        sys.executable, "-m", "experiments.train", "--agent=acer", "--env=CartPole-v1",
        f"--logdir={logdir}", "--num_envs=2", "--t_max=5", "--hidden_sizes=16",
        "--replay_start_size=10", "--n_times_replay=1", "--eval_episodes=1", "--export=false",
        "--checkpoint_every_s=0.5", "--log_every_s=100",
    ]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.Popen(
        [*args, "--total_steps=100000000"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline, size = time.monotonic() + 120, 0
        while time.monotonic() < deadline and size == 0:
            time.sleep(0.2)
            ckpt = tf.train.latest_checkpoint(str(logdir / "checkpoints"))
            if ckpt is not None:
                step = int(ckpt.rsplit("-", 1)[1])
                size = storage.load_arrays(storage.replay_path(str(logdir), step))[1]["size"]
        assert size > 0, "no checkpoint with a non-empty replay within 120 s"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    step = int(tf.train.latest_checkpoint(str(logdir / "checkpoints")).rsplit("-", 1)[1])
    arrays, meta = storage.load_arrays(storage.replay_path(str(logdir), step))
    assert meta["size"] > 0
    # Resume (total_steps = the checkpoint's step: restore, evaluate, save, no training).
    out = subprocess.run(
        [*args, f"--total_steps={step}"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    final = json.loads(out.stdout.strip().splitlines()[-1])
    assert final["resumed"] is True and final["step"] == step
    assert final["replay_restored"] == meta["size"] == int(arrays["lengths"].sum())
    assert final["replay_size"] == meta["size"]


def test_ray_backend_needs_workers(tmp_path):
    run = RunConfig(backend="ray", total_steps=100)
    with pytest.raises(ValueError, match="^num_workers: backend='ray' runs ACER's"):
        train(run, AcerConfig(), NetworkConfig(), str(tmp_path))


@pytest.mark.slow  # a private Ray and worker processes importing TensorFlow
def test_ray_workers_train_into_the_learners_replay_and_a_killed_one_is_replaced(
    tmp_path, ray_session
):
    """Two ACER worker processes act and return gradients (on-policy and replayed); the
    unrolls fill the learner's replay, archived with the checkpoint; a worker process killed
    mid-run is replaced and counted. (Resume is the driver's and the replay's, as with
    threads: test_interrupt_stops_the_workers_saves_and_resumes; a replacement's work is
    checked by test_a3c's Ray test, with the same worker pool.)"""
    cfg = AcerConfig(t_max=5, replay_start_size=100, n_times_replay=2, num_workers=2)
    net_cfg = network_config_for(NetworkConfig(hidden_sizes=(16,)), cfg, env_spaces("CartPole-v1"))
    run = RunConfig(env_id="CartPole-v1", total_steps=1000, num_envs=2, eval_episodes=2,
                    log_every_s=0.05, backend="ray")  # fmt: skip
    trainer = make_driver(run, get_agent("acer"), cfg, net_cfg, str(tmp_path))
    advance, seen = trainer.agent.advance, {}

    def kill_worker_0_once():
        source = trainer.agent.source
        if not seen and trainer.counters.env_steps >= 300:
            seen["pid"] = ray_session.get(source.handles[0].pid.remote())
            os.kill(seen["pid"], signal.SIGKILL)
            # Until Ray reports the death (not until the replacement is built: the A3C test
            # waits for that; here the replacement may still be starting when the run ends).
            (call,) = [ref for ref, worker in source.pending.items() if worker == 0]
            ray_session.wait([call], timeout=60)
        return advance()

    trainer.agent.advance = kill_worker_0_once
    final = trainer.run()
    source = trainer.agent.source
    assert 1000 <= final["step"] < 1010 and final["step"] == sum(source.worker_steps)
    iterations = final["step"] // 10
    assert iterations + 100 < final["updates"] <= 3 * iterations  # replayed updates too
    assert source.actor_restarts == [1, 0] and final["env_restarts"] == 1
    assert final["replay_size"] > 600 and final["eval_return"] > 0
    archive = storage.load_arrays(storage.replay_path(str(tmp_path), final["step"]))[1]
    assert archive["size"] == final["replay_size"]
    assert os.path.exists(os.path.join(tmp_path, "policy", "saved_model.pb"))
    _assert_actors_dead(source)
