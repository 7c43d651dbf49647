"""multi_worker run directories: the chief rule from TF_CONFIG, and a non-chief worker that
writes nothing into the run directory (TF's multi-worker custom-training-loop guide)."""

import dataclasses
import json
import os

import pytest

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime import strategy as strategy_lib
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver

AGENT = get_agent("impala")
NET = NetworkConfig(hidden_sizes=(16,))
TWO_WORKERS = {"worker": ["localhost:12345", "localhost:23456"]}
CHIEF_AND_WORKER = {"chief": ["localhost:12345"], "worker": ["localhost:23456"]}


def _tf_config(monkeypatch, cluster, task_type, index):
    config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    monkeypatch.setenv("TF_CONFIG", json.dumps(config))


@pytest.mark.parametrize(
    "cluster, task_type, index, chief",
    [
        (TWO_WORKERS, "worker", 0, True),  # worker 0 is the chief when there is no chief job
        (TWO_WORKERS, "worker", 1, False),
        (CHIEF_AND_WORKER, "chief", 0, True),
        (CHIEF_AND_WORKER, "worker", 0, False),  # a chief job exists: worker 0 is not it
        ({**TWO_WORKERS, "evaluator": ["localhost:3"]}, "evaluator", 0, False),
    ],
)
def test_chief_rule_from_tf_config(monkeypatch, cluster, task_type, index, chief):
    _tf_config(monkeypatch, cluster, task_type, index)
    role = strategy_lib.role_from_tf_config()
    assert role == strategy_lib.WorkerRole(task_type, index, chief)
    assert strategy_lib.is_chief(task_type, index, cluster) is chief


@pytest.mark.parametrize("cluster", [TWO_WORKERS, CHIEF_AND_WORKER])
def test_every_training_task_gets_its_own_actor_seed_offset(monkeypatch, cluster):
    offsets = []
    for task_type, addresses in cluster.items():
        for index in range(len(addresses)):
            _tf_config(monkeypatch, cluster, task_type, index)
            role = strategy_lib.role_from_tf_config()
            offsets.append(role.seed_offset)
            assert (role.seed_offset == 0) is role.is_chief
    assert len(set(offsets)) == len(offsets)


def test_without_tf_config_or_cluster_strategy_the_process_is_the_chief(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert strategy_lib.role_from_tf_config().is_chief
    assert strategy_lib.worker_role(None).is_chief
    _tf_config(monkeypatch, TWO_WORKERS, "worker", 1)  # ignored by non-cluster strategies
    assert strategy_lib.worker_role(strategy_lib.make_strategy("default")).is_chief


def test_write_dir_is_the_run_dir_only_for_the_chief(tmp_path):
    logdir = str(tmp_path / "run")
    assert strategy_lib.write_dir(logdir, strategy_lib.WorkerRole()) == logdir
    other = strategy_lib.write_dir(logdir, strategy_lib.WorkerRole("worker", 1, False))
    assert os.path.isdir(other) and "worker1" in os.path.basename(other)
    assert not os.path.abspath(other).startswith(os.path.abspath(logdir) + os.sep)
    assert not os.path.exists(logdir)


def _snapshot(path):
    """``{relative path: (size, mtime_ns)}`` of every file under ``path``."""
    stats = {}
    for root, _, names in os.walk(path):
        for name in names:
            st = os.stat(os.path.join(root, name))
            stats[os.path.relpath(os.path.join(root, name), path)] = (st.st_size, st.st_mtime_ns)
    return stats


def test_non_chief_worker_writes_nothing_into_the_run_dir(tmp_path, monkeypatch):
    logdir = str(tmp_path / "run")
    run = RunConfig(total_steps=256, num_actors=0, num_envs=8, unroll_length=8, eval_episodes=2,
                    log_every_s=0.01, export_policy=False)  # fmt: skip
    chief = make_driver(run, AGENT, AGENT.Config(), NET, logdir)
    assert chief.logdir == logdir and chief.run()["step"] == 256
    before = _snapshot(logdir)
    assert "config.json" in before and "metrics.jsonl" in before
    # Worker 1 of 2: the default strategy has no cluster, so read its role from TF_CONFIG.
    _tf_config(monkeypatch, TWO_WORKERS, "worker", 1)
    monkeypatch.setattr(strategy_lib, "worker_role", lambda s: strategy_lib.role_from_tf_config())
    longer = dataclasses.replace(run, total_steps=512, export_policy=True)
    worker = make_driver(longer, AGENT, AGENT.Config(), NET, logdir)
    assert not worker.role.is_chief and worker.logdir != logdir
    final = worker.run()
    assert final["resumed"] and final["step"] == 512  # resumed from the chief's checkpoint
    assert _snapshot(logdir) == before  # nothing written, touched or removed
    written = os.listdir(worker.logdir)  # the same files went to the worker's temp dir
    for name in ("config.json", "metrics.jsonl", "checkpoints", "policy"):
        assert name in written
