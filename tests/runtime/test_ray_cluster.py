"""IMPALA on a two-node Ray cluster on this machine (``ray.cluster_utils.Cluster``, shared by
the module's tests): the actors spread over the nodes; a node removed mid-run (training
continues on the other node's actor, the lost actor is replaced when capacity returns and
counted in ``env_restarts``, the learner loses nothing); the learner process SIGKILLed (Ray
ends its actors with it, the same command resumes from the checkpoint with new actors on
both nodes); two ``multi_worker`` learner processes on localhost, each driving its own Ray
actor (make test-long). Skipped without Ray."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.free_ports import free_ports
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver
from tfagents_vtrace.runtime.rundir import metrics_log
from tfagents_vtrace.runtime.rundir.checkpoint_files import complete_steps
from tfagents_vtrace.runtime.rundir.run_lock import RunDirLockedError, RunLock

ray = pytest.importorskip("ray", reason="ray is not installed (pip install .[ray])")
from ray._private import state as ray_state  # noqa: E402 - GCS's actor table (no dashboard)
from ray.cluster_utils import Cluster  # noqa: E402

# One xdist worker runs the module (make test: --dist loadgroup), so its tests share one cluster.
pytestmark = pytest.mark.xdist_group("ray_cluster")
# The installed command beside this Python (the module where it is not installed).
_SCRIPT = shutil.which("tfv-train", path=os.path.dirname(sys.executable))
TRAIN = [_SCRIPT] if _SCRIPT else [sys.executable, "-m", "tfagents_vtrace.commands.train"]


@pytest.fixture(scope="module")
def cluster():
    """A head node and one worker node, 1 CPU each (one IMPALA actor per node); the test
    process is a driver too (it inspects the cluster)."""
    if ray.is_initialized():
        ray.shutdown()
    # Ray starts its workers at niceness 15: beside the suite's other xdist worker (niceness
    # 0, busy with TensorFlow) the actors got a few percent of a core and could take minutes
    # to build. A raylet passes its environment on to the workers it starts (nodes added by the
    # tests too, so the variable stays set while the module runs).
    niceness = os.environ.get("RAY_worker_niceness")
    os.environ["RAY_worker_niceness"] = "0"
    nodes = None
    try:
        nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        nodes.add_node(num_cpus=1)
        ray.init(address=nodes.address, log_to_driver=False)
        yield nodes
    finally:
        ray.shutdown()
        if nodes is not None:
            nodes.shutdown()
        if niceness is None:
            del os.environ["RAY_worker_niceness"]
        else:
            os.environ["RAY_worker_niceness"] = niceness


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


def _actor_hosts() -> dict:
    """``{actor id: GCS record}`` of the cluster's IMPALA actor processes, dead ones too."""
    table = ray_state.actors().values()
    return {a["ActorID"]: a for a in table if a["ActorClassName"] == "ActorHost"}


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait(condition, seconds: float, what: str, proc=None) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert proc is None or proc.poll() is None, f"the learner ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)


@pytest.mark.slow  # two learner processes importing TensorFlow, four actor processes
def test_the_learner_killed_resumes_with_new_actors_on_both_nodes(tmp_path, cluster):
    logdir, total = str(tmp_path / "run"), 8192
    cmd = [*TRAIN, "--agent=impala", "--backend=ray", f"--ray_address={cluster.address}",
           "--num_actors=2", f"--logdir={logdir}", f"--total_steps={total}", "--num_envs=8",
           "--unroll_length=8", "--hidden_sizes=16", "--eval_episodes=2", "--eval_every=0",
           "--checkpoint_every_s=0.3", "--log_every_s=0.1", "--noexport"]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    before = set(_actor_hosts())
    start = time.monotonic()
    with open(tmp_path / "first.err", "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
    try:
        checkpoints = os.path.join(logdir, "checkpoints")
        _wait(lambda: complete_steps(checkpoints)[:1] > [0], 240, "checkpoint past step 0", proc)
        saved = complete_steps(checkpoints)[0]  # and a row past it, which the resume drops
        last_step = lambda: max(
            r["step"] for r in [{"step": -1}, *metrics_log.read_metrics(logdir)]
        )
        _wait(lambda: last_step() > saved, 30, "row", proc)
        with pytest.raises(RunDirLockedError) as locked:  # the learner holds the directory
            RunLock(logdir).acquire()
        first = {k: a for k, a in _actor_hosts().items() if k not in before}
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert locked.value.pid == proc.pid
    assert not os.path.exists(os.path.join(logdir, "final.json")), "killed after it ended"
    assert len(first) == 2 and {a["State"] for a in first.values()} == {"ALIVE"}
    assert len({a["Address"]["NodeID"] for a in first.values()}) == 2  # one actor per node
    # Ray ends a dead driver's (non-detached) actors: marked dead, their processes gone.
    _wait(lambda: not any(_pid_alive(a["Pid"]) for a in first.values()), 30, "actor exit")
    for actor_id in first:
        assert ray_state.actors(actor_id=actor_id)["State"] == "DEAD"
    RunLock(logdir).acquire().release()  # the kernel dropped the dead learner's lock
    saved, rows = (
        complete_steps(os.path.join(logdir, "checkpoints"))[0],
        metrics_log.read_metrics(logdir),
    )
    killed = time.monotonic()

    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    final = json.loads(out.stdout.strip().splitlines()[-1])
    said = [line for line in out.stderr.splitlines() if "Resuming" in line or "heckpoint" in line]
    assert f"Resuming {logdir} from step {saved} " in out.stderr, said or out.stderr[-2000:]
    assert final["resumed"] and final["step"] == total and final["updates"] == total // 64
    assert final["env_restarts"] == 0
    resumed = metrics_log.read_metrics(logdir)
    steps = [row["step"] for row in resumed]
    assert steps == sorted(set(steps)) and steps[-1] == total
    assert [r for r in resumed if r["step"] <= saved] == [r for r in rows if r["step"] <= saved]
    assert not [r for r in rows if r["step"] > saved and r in resumed]  # dropped on resume
    walls = [row["wall_time"] for row in resumed]
    assert walls == sorted(walls)  # wall time continues across the resume
    # New actors, one per node again, all ended with the run: no orphans.
    second = {k: a for k, a in _actor_hosts().items() if k not in before and k not in first}
    assert len(second) == 2 and len({a["Address"]["NodeID"] for a in second.values()}) == 2
    _wait(lambda: not any(_pid_alive(a["Pid"]) for a in second.values()), 30, "actor exit")
    _wait(lambda: {a["State"] for a in _actor_hosts().values()} == {"DEAD"}, 30, "actor end")
    RunLock(logdir).acquire().release()
    print(f"killed learner: {killed - start:.1f} s to the kill, resumed in "
          f"{time.monotonic() - killed:.1f} s")  # fmt: skip


# About as long as the killed-learner test (two learner processes importing TensorFlow, two
# actor processes): left to make test-long for the suite's time budget.
@pytest.mark.long
def test_multi_worker_learners_each_with_their_own_ray_actors(tmp_path, cluster):
    logdir, workers = str(tmp_path / "run"), [f"localhost:{p}" for p in free_ports(2)]
    cmd = [*TRAIN, "--agent=impala", "--strategy=multi_worker", "--backend=ray",
           f"--ray_address={cluster.address}", "--num_actors=1", f"--logdir={logdir}",
           "--total_steps=1024", "--num_envs=8", "--unroll_length=8", "--hidden_sizes=16",
           "--num_epochs=1", "--num_minibatches=1", "--eval_episodes=2", "--eval_every=0",
           "--noexport"]  # fmt: skip
    before = set(_actor_hosts())
    start, procs = time.monotonic(), []
    for index in range(2):  # files, not pipes: a full pipe would stall both learners
        task = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_CONFIG=json.dumps(task))
        with (
            open(tmp_path / f"{index}.out", "w") as out,
            open(tmp_path / f"{index}.err", "w") as err,
        ):
            procs.append(subprocess.Popen(cmd, stdout=out, stderr=err, env=env))
    try:  # until both end, or one fails (the other would wait for it in a collective)
        codes = lambda: [proc.poll() for proc in procs]
        _wait(lambda: None not in codes() or any(codes()), 300, "end of both learners")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    for index, proc in enumerate(procs):
        assert proc.returncode == 0, (tmp_path / f"{index}.err").read_text()[-3000:]
    outs = [(tmp_path / f"{index}.out").read_text() for index in range(2)]
    chief, other = (json.loads(out.strip().splitlines()[-1]) for out in outs)
    for final in (chief, other):  # every update a collective step of both learners
        assert final["step"] == 1024 and final["updates"] == 1024 // 64
    # One set of weights: both evaluate the same greedy policy on the same episodes.
    assert chief["eval_return"] == other["eval_return"]
    assert metrics_log.read_metrics(logdir)[-1]["step"] == 1024  # the chief's run directory
    # Each learner drove its own Ray actor (its own job), one per node.
    actors = {k: a for k, a in _actor_hosts().items() if k not in before}
    assert len(actors) == 2 and len({a["JobID"] for a in actors.values()}) == 2
    assert len({a["Address"]["NodeID"] for a in actors.values()}) == 2
    _wait(lambda: not any(_pid_alive(a["Pid"]) for a in actors.values()), 30, "actor exit")
    print(f"multi_worker learners with Ray actors: {time.monotonic() - start:.1f} s")
