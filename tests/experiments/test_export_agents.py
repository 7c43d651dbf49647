"""experiments.export --logdir works on A2C, A3C and ACER runs, whose learners checkpoint the
Keras model as ``network`` (IMPALA's lists its variables as ``network_weights``)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids
from tfagents_vtrace.envs import env_spaces
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET = NetworkConfig(hidden_sizes=(8,))


def _short_run(agent: str, logdir: str) -> None:
    """A few seconds of training on CartPole; the run exports LOGDIR/policy at its end."""
    run = RunConfig(env_id="CartPole-v1", total_steps=40, num_envs=2, unroll_length=5,
                    num_actors=0, eval_episodes=1, log_every_s=0.5)  # fmt: skip
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.driver import train

    module = get_agent(agent)
    if agent == "a2c":
        train(run, module, module.Config(), NET, logdir)
    elif agent == "a3c":
        train(run, module, module.Config(num_workers=2, t_max=5), NET, logdir)
    else:
        cfg = module.Config(t_max=5, replay_start_size=10, n_times_replay=1)
        train(
            run, module, cfg, module.network_config_for(NET, cfg, env_spaces("CartPole-v1")), logdir
        )


def _greedy(policy, obs):
    n = obs.shape[0]
    return policy.greedy_action(
        observation=obs, first=np.ones(n, bool), prev_action=np.zeros(n, np.int32),
        prev_reward=np.zeros(n, np.float32), state=policy.get_initial_state(tf.constant(n)),
    )  # fmt: skip


@pytest.mark.parametrize("agent", ["a2c", "a3c", "acer"])
def test_restore_network_reads_the_keras_model_layout(tmp_path, agent):
    logdir = str(tmp_path / agent)
    _short_run(agent, logdir)
    network = restore_network(logdir)  # was: AssertionError (no network_weights)
    trained = tf.saved_model.load(os.path.join(logdir, "policy"))  # exported by the run
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    out = network(NetInputs(obs, np.ones(6, bool), np.zeros(6, np.int32), np.zeros(6)), ())
    want = _greedy(trained, obs)
    np.testing.assert_allclose(out.value.numpy(), want["value"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(out.policy["logits"].numpy(), want["logits"].numpy(), rtol=1e-5)


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_export_cli_on_an_acer_run(tmp_path):
    logdir, output = str(tmp_path / "acer"), str(tmp_path / "exported")
    _short_run("acer", logdir)
    cmd = [sys.executable, "-m", "experiments.export", f"--logdir={logdir}", f"--output={output}"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == output
    obs = np.random.default_rng(1).normal(size=(3, 4)).astype(np.float32)
    got = _greedy(tf.saved_model.load(output), obs)
    want = _greedy(tf.saved_model.load(os.path.join(logdir, "policy")), obs)
    np.testing.assert_allclose(got["value"].numpy(), want["value"].numpy(), rtol=1e-5)
