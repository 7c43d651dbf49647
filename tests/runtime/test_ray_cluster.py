"""IMPALA on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``): the
actors spread over the nodes, a node is removed mid-run, training continues on the other
node's actor, the lost actor is replaced when capacity returns and counted in
``env_restarts``, and the learner loses nothing. Skipped without Ray."""

import time

import pytest

from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime import metrics_log
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver

ray = pytest.importorskip("ray", reason="ray is not installed (pip install .[ray])")
from ray.cluster_utils import Cluster  # noqa: E402


@pytest.fixture
def cluster():
    """A head node and one worker node, 1 CPU each (one IMPALA actor per node); the test
    process is the driver."""
    if ray.is_initialized():
        ray.shutdown()
    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes.add_node(num_cpus=1)
    ray.init(address=nodes.address, log_to_driver=False)
    yield nodes
    ray.shutdown()
    nodes.shutdown()


def _node_of(handle) -> str:
    return ray.get(
        handle.__ray_call__.remote(lambda self: ray.get_runtime_context().get_node_id()),
        timeout=60,
    )


def test_a_node_lost_mid_run_its_actor_is_replaced_when_capacity_returns(tmp_path, cluster):
    (worker_node,) = cluster.worker_nodes
    run = RunConfig(total_steps=3072, num_envs=8, unroll_length=8, eval_episodes=2,
                    export_policy=False, backend="ray", num_actors=2, log_every_s=0.05,
                    ray_address=cluster.address)  # fmt: skip
    agent = get_agent("impala")
    trainer = make_driver(run, agent, agent.Config(), NetworkConfig(hidden_sizes=(16,)),
                          str(tmp_path))  # fmt: skip
    advance, seen = trainer.agent.advance, {"infos": set()}

    def lose_a_node_then_give_capacity_back():
        counters, pool = trainer.counters, trainer.agent.source.threads[0]
        if "next" not in seen:  # record which actor (and which of its lives) each unroll is
            source, seen["next"] = trainer.agent.source, trainer.agent.source.next

            def next_unroll():
                item = seen["next"]()
                seen["infos"].add((item[1]["actor_id"], item[1]["env_restarts"]))
                return item

            source.next = next_unroll
            seen["nodes"] = [_node_of(handle) for handle in pool.handles]
        if "removed" not in seen and counters.env_steps >= 512:
            seen["removed"], seen["updates"] = counters.env_steps, counters.updates
            cluster.remove_node(worker_node)
        elif "removed" in seen and "added" not in seen and counters.env_restarts == 1:
            if counters.env_steps >= seen["removed"] + 512:  # trained on the other node alone
                seen["added"] = counters.env_steps
                cluster.add_node(num_cpus=1)
                lost = pool.actor_restarts.index(1)
                seen["new_node"] = _node_of(pool.handles[lost])  # the replacement, built
        return advance()

    trainer.agent.advance = lose_a_node_then_give_capacity_back
    start = time.monotonic()
    final = trainer.run()
    pool = trainer.agent.source.threads[0]
    assert len(set(seen["nodes"])) == 2  # one actor per node
    assert final["step"] == 3072 and final["updates"] == 3072 // 64  # no update lost
    assert seen["added"] >= seen["removed"] + 512 and final["env_restarts"] == 1
    lost = pool.actor_restarts.index(1)
    assert sorted(pool.actor_restarts) == [0, 1]
    assert seen["new_node"] not in seen["nodes"]  # placed on the node that came back
    assert (lost, 1) in seen["infos"] and (1 - lost, 0) in seen["infos"]  # the new life acted
    rows = metrics_log.read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == sorted({r["step"] for r in rows})
    assert rows[-1]["env_restarts"] == 1 and final["eval_return"] > 0
    assert pool.error is None and not pool.is_alive()
    print(f"cluster run: {time.monotonic() - start:.1f} s")
