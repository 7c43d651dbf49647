"""One learner worker of ``test_multi_worker_update.py``: under ``TF_CONFIG`` (two workers),
loads the pickled batch and initial weights, takes its own columns of the batch, runs one
IMPALA update with MultiWorkerMirroredStrategy and pickles the weights after it.

    python -m tests.agents._two_worker_update IN.pkl OUT.pkl
"""

import json
import os
import pickle
import sys

import numpy as np

from tfagents_vtrace.agents.impala import ImpalaConfig, ImpalaLearner
from tfagents_vtrace.networks import NetworkConfig, make_network
from tfagents_vtrace.runtime.strategy import make_strategy


def main(path_in: str, path_out: str) -> None:
    with open(path_in, "rb") as f:
        job = pickle.load(f)
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    strategy = make_strategy("multi_worker")
    learner = ImpalaLearner(
        ImpalaConfig(**job["config"]),
        lambda: make_network(NetworkConfig(hidden_sizes=(8,)), job["obs"], job["act"]),
        strategy,
    )
    learner.network.set_weights(job["weights"])
    columns = job["columns"][index]
    batch = {k: v for k, v in job["batch"].items() if k not in ("policy", "state")}
    batch = {k: v[:, columns] for k, v in batch.items()}
    batch["policy"] = {k: v[:, columns] for k, v in job["batch"]["policy"].items()}
    batch["state"] = ()
    metrics = learner.train_step(batch)
    weights = [np.asarray(w) for w in learner.network.get_weights()]
    with open(path_out, "wb") as f:
        pickle.dump({"weights": weights, "loss": metrics["loss"]}, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
