"""experiments.export: rebuild the network from a run directory and export its policy."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetInputs, NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.loop import train
from tfagents_vtrace.runtime.run_dir import restore_network

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.slow  # a subprocess importing TensorFlow and training
def test_export_round_trip(tmp_path):
    logdir, output = str(tmp_path / "run"), str(tmp_path / "exported")
    agent = get_agent("impala")
    run = RunConfig(total_steps=512, num_envs=8, unroll_length=8, eval_episodes=2,
                    export_policy=False)  # fmt: skip
    train(run, agent, agent.Config(), NetworkConfig(hidden_sizes=(16,)), logdir)
    subprocess.run(
        [sys.executable, "-m", "experiments.export", f"--logdir={logdir}", f"--output={output}"],
        cwd=ROOT, check=True, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    network = restore_network(logdir)
    policy = tf.saved_model.load(output)
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    first, prev_action = np.ones(6, bool), np.zeros(6, np.int32)
    prev_reward = np.zeros(6, np.float32)
    state = policy.get_initial_state(batch_size=tf.constant(6))
    out = policy.greedy_action(observation=obs, first=first, prev_action=prev_action,
                               prev_reward=prev_reward, state=state)  # fmt: skip
    expected = network(NetInputs(obs, first, prev_action, prev_reward), ())
    np.testing.assert_array_equal(
        out["action"].numpy(), np.argmax(expected.policy["logits"].numpy(), -1)
    )
    np.testing.assert_allclose(out["value"].numpy(), expected.value.numpy(), rtol=1e-5)
