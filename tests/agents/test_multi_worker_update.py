"""Two MultiWorkerMirroredStrategy learner workers on localhost, each fed its own half of a
batch (as each worker's own actors feed it), take the same update as one learner on the
whole batch: every worker trains on all of its columns, and the gradients average over both
workers' columns."""

import json
import os
import pickle
import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tests.agents._unroll_batch import unroll_batch
from tests.free_ports import free_ports
from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner
from tfagents_vtrace.networks import NetworkConfig, make_network

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)
# The paper's update on raw advantages: normalised ones are normalised per replica.
CONFIG = dict(optimizer="adam", learning_rate=1e-2, lr_decay="none", policy_loss="vtrace",
              num_epochs=1, num_minibatches=1, normalize_advantages=False)  # fmt: skip


def test_two_workers_each_with_its_own_batch_take_the_whole_batch_update(tmp_path, rng):
    batch = unroll_batch(rng, 5, 8, ACT.n, truncate=[(1, 2)], terminate=[(6, 3)])
    tf.keras.utils.set_random_seed(0)
    reference = ImpalaLearner(
        ImpalaConfig(**CONFIG), lambda: make_network(NetworkConfig(hidden_sizes=(8,)), OBS, ACT)
    )
    init = reference.network.get_weights()
    job = {"config": CONFIG, "obs": OBS, "act": ACT, "weights": init, "batch": batch,
           "columns": [[0, 1, 2, 3], [4, 5, 6, 7]]}  # fmt: skip
    with open(tmp_path / "job.pkl", "wb") as f:
        pickle.dump(job, f)
    workers = [f"localhost:{p}" for p in free_ports(2)]
    procs = []
    for index in range(2):
        task = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CONFIG=json.dumps(task), TF_CPP_MIN_LOG_LEVEL="3")
        cmd = [sys.executable, "-m", "tests.agents._two_worker_update", str(tmp_path / "job.pkl"),
               str(tmp_path / f"out{index}.pkl")]  # fmt: skip
        procs.append(subprocess.Popen(cmd, cwd=REPO, env=env, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        try:
            _, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            pytest.fail("a learner worker did not finish in 180 s")
        assert proc.returncode == 0, err[-2000:]
    expected = reference.train_step(batch)
    before_after = [np.abs(a - b).max() for a, b in zip(init, reference.network.get_weights())]
    assert min(before_after) > 1e-4  # every weight moved: the comparison below is not vacuous
    for index in range(2):
        with open(tmp_path / f"out{index}.pkl", "rb") as f:
            out = pickle.load(f)
        np.testing.assert_allclose(out["loss"], expected["loss"], rtol=1e-5, atol=1e-6)
        for a, b in zip(reference.network.get_weights(), out["weights"]):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
