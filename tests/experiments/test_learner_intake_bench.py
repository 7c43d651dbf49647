"""benchmarks/learner_intake.py: its stub Ray actors replay recorded unrolls through
``RayActorPool``'s driver and queue unchanged; a bad flag is one line and exit code 2."""

import queue
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "learner_intake.py"


def _bench():  # registered: Ray pickles its stub actor class by value from here
    return load_benchmark("learner_intake", "learner_intake_bench", register=True)


@pytest.mark.parametrize(
    "flag, message",
    [("--actors=0", "error: --actors: expected comma-separated ints >= 1"),
     ("--configs=impala_nope", "error: --configs: no flagfile and no shipped config 'impala_nope'"),
     ("--repeats=x", "error: argument --repeats: invalid int value: 'x'"),
     ("--frames=twice", "error: --frames: expected stacked and/or once, received ['twice']")],
)  # fmt: skip
def test_a_bad_flag_is_one_line_and_exit_code_2(flag, message):
    out = subprocess.run([sys.executable, str(SCRIPT), flag], capture_output=True, text=True)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.splitlines() == [out.stderr.strip()] and out.stderr.startswith(message)


def test_stub_actors_replay_recorded_unrolls_through_the_ray_pool():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install .[ray])")
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, WeightStore
    from tfagents_vtrace.runtime.acting.ray_backend import init_local_ray
    from tfagents_vtrace.runtime.acting.unroll_sources import QueueSource

    spec = ActorSpec("CartPole-v1", NetworkConfig(hidden_sizes=(8,)), num_envs=4, unroll_length=3)
    actor = Actor(spec)
    recorded = [actor.unroll()[0] for _ in range(2)]
    actor.close()
    bench = _bench()
    started = not ray.is_initialized()
    if started:
        init_local_ray(2, log_to_driver=False)
    try:
        IntakePool, StubPool = bench.pool_classes()
        store, stop, unrolls = WeightStore(), threading.Event(), queue.Queue(maxsize=2)
        shipped = {bench.STACKED: recorded[::-1], bench.ONCE: recorded}  # it ships "once"
        handle = StubPool(ray.put(shipped), spec, 1, store, None, None)._new_actor(0)
        ray.get(handle.ship.remote(bench.ONCE))
        source = QueueSource([IntakePool([handle], spec, 1, store, unrolls, stop)], unrolls,
                             store, stop)  # fmt: skip
        source.start(5, [np.ones(3, np.float32)])
        items = [source.next() for _ in range(3)]
        source.close()
        for k, (unroll, info) in enumerate(items):  # the recorded unrolls in turn, unchanged
            want = recorded[k % 2]
            assert unroll.keys() == want.keys()
            for key in ("observation", "action", "reward", "first", "prev_action"):
                assert unroll[key].dtype == want[key].dtype, key
                np.testing.assert_array_equal(unroll[key], want[key])
            assert unroll["policy"]["logits"].shape == (3, 4, 2)
            assert info["weights_version"] == 5 and info["actor_id"] == 0
        # the pool leaves the actor alive for the next measurement
        assert ray.get(handle.pid.remote(), timeout=30) > 0
        ray.kill(handle, no_restart=True)
    finally:
        if started:
            ray.shutdown()
