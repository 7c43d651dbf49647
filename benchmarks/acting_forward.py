"""The actor's forward pass: numpy against compiled TensorFlow, per network and batch size.

    python benchmarks/acting_forward.py [--nets=small_atari_cnn,nature_cnn,minatar_cnn,mlp]
        [--batches=1,4,8,16,32,64] [--seconds=0.5] [--rounds=3] [--busy]

For each network (the conv torsos on their games' observations: 84x84x4 uint8 frames for
``small_atari_cnn`` and ``nature_cnn``, MinAtar's 10x10x4 for ``minatar_cnn``; ``mlp``, the
default 64x64 MLP on CartPole's 4 floats and a 256x256 one on MinAtar's 400) and each batch
size, one acting step (forward pass and action sampling, what an actor calls once per vector
step) of each implementation an actor can use (``runtime/acting/policies.py``):

* ``numpy``: the numpy forward pass (``NumpyConvPolicy`` / ``NumpyMLPPolicy``), float32;
* ``tf``: the compiled ``tf.function`` step (``TFPolicy``), in the network's compute dtype
  (``cnn_compute_dtype=auto``: bfloat16 where the CPU has it natively);
* ``xla``: the same step compiled with XLA (``jit_compile=True``).

Timed in milliseconds per agent step (one observation), wall and CPU (the process's, every
thread's), medians over ``--rounds`` rounds in which the implementations take turns. The
reference is the learner's own forward pass per sample: the network's compiled forward on a
learner minibatch (``--learner_batch``, 256: IMPALA's Pong file trains on minibatches of
256 steps) in the same dtype; the table gives each implementation's cost as a multiple of it.
``--busy`` runs a learner-like load beside the timing (a thread training the same network on
that minibatch without pause, as a training run's learner does), which is what an actor's
policy step competes with for TensorFlow's thread pool during training. The first line names
the machine (``benchmarks/machine.py``); the last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as the commands set it

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from machine import machine_line  # noqa: E402
from stage_costs import timed  # noqa: E402

sys.path.remove(_HERE)  # benchmarks/minatar.py would shadow the minatar package

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network  # noqa: E402
from tfagents_vtrace.runtime.acting.policies import (  # noqa: E402
    TFPolicy,
    numpy_policy_class,
)

NETS = {  # name: (observation space, network settings)
    "small_atari_cnn": (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
                        {"torso": "small_atari_cnn", "cnn_compute_dtype": "auto"}),
    "nature_cnn": (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8),
                   {"torso": "nature_cnn", "cnn_compute_dtype": "auto"}),
    "minatar_cnn": (gym.spaces.Box(0, 1, (10, 10, 4), np.uint8),
                    {"torso": "minatar_cnn", "cnn_compute_dtype": "auto"}),
    "mlp": (gym.spaces.Box(-5.0, 5.0, (4,), np.float32), {"torso": "mlp"}),
    "mlp_256": (gym.spaces.Box(0, 1, (400,), np.float32),
                {"torso": "mlp", "hidden_sizes": (256, 256)}),
}  # fmt: skip
ACTIONS = gym.spaces.Discrete(6)


def _network(name: str):
    space, settings = NETS[name]
    return make_network(NetworkConfig(**settings), space, ACTIONS), space


def _inputs(space, batch: int, rng) -> tuple:
    if space.dtype == np.uint8:
        obs = rng.integers(0, int(space.high.max()) + 1, (batch, *space.shape), np.uint8)
    else:
        obs = rng.random((batch, *space.shape), np.float32)
    return obs, np.zeros(batch, bool), np.zeros(batch, np.int32), np.zeros(batch, np.float32)


def implementations(net) -> dict:
    """``{name: policy}`` of the implementations that can act for ``net``."""
    out = {}
    cls = numpy_policy_class(net, "numpy") if _numpy_ok(net) else None
    if cls is not None:
        out["numpy"] = cls(net)
    out["tf"] = TFPolicy(net)
    out["xla"] = TFPolicy(net, jit_compile=True)
    return out


def _numpy_ok(net) -> bool:
    try:
        return numpy_policy_class(net, "numpy") is not None
    except ValueError:
        return False


def learner_forward(net, space, batch: int, rng):
    """A compiled forward pass of ``net`` on a learner minibatch of ``batch`` samples."""
    obs, first, prev_a, prev_r = (tf.constant(x) for x in _inputs(space, batch, rng))
    inputs = NetInputs(obs, first, prev_a, prev_r)
    step = tf.function(lambda: net(inputs, ()).policy["logits"])
    return step


def learner_update(net, space, batch: int, rng):
    """One compiled gradient step of ``net`` on ``batch`` samples (the ``--busy`` load)."""
    obs, first, prev_a, prev_r = (tf.constant(x) for x in _inputs(space, batch, rng))
    inputs = NetInputs(obs, first, prev_a, prev_r)
    opt = tf.keras.optimizers.Adam(1e-9)

    @tf.function
    def update():
        with tf.GradientTape() as tape:
            out = net(inputs, ())
            loss = tf.reduce_mean(tf.cast(out.policy["logits"], tf.float32) ** 2)
        grads = tape.gradient(loss, net.trainable_variables)
        opt.apply_gradients(zip(grads, net.trainable_variables))

    return update


def _time(call, seconds: float, per_call: int) -> tuple[float, float]:
    """Wall and CPU milliseconds per sample of ``call()`` over at least ``seconds``."""
    calls, cpu, wall = timed(call, seconds)
    return 1e3 * wall / (calls * per_call), 1e3 * cpu / (calls * per_call)


def _busy_load(name: str, space, batch: int, rng, stop: threading.Event) -> threading.Thread:
    """A thread training a copy of ``name`` on ``batch`` samples until ``stop`` is set."""
    net, _ = _network(name)
    update = learner_update(net, space, batch, rng)
    update()

    def run_load():
        while not stop.is_set():
            update()

    load = threading.Thread(target=run_load, daemon=True)
    load.start()
    return load


def _measure_net(name, batches, seconds, rounds, learner_batch, busy, rng) -> dict:
    """Medians of wall / CPU ms per sample of each implementation and batch of ``name``."""
    net, space = _network(name)
    impls = implementations(net)
    reference = learner_forward(net, space, learner_batch, rng)
    stop = threading.Event()
    load = _busy_load(name, space, learner_batch, rng, stop) if busy else None
    runs: dict[str, list] = {}
    try:
        for _ in range(rounds):
            runs.setdefault("learner_forward", []).append(_time(reference, seconds, learner_batch))
            for batch in batches:
                inputs = _inputs(space, batch, rng)
                for impl, policy in impls.items():
                    state = policy.initial_state(batch)
                    call = lambda p=policy, x=inputs, s=state: p.step(*x, s)  # noqa: E731
                    runs.setdefault(f"{impl}@{batch}", []).append(_time(call, seconds, batch))
    finally:
        stop.set()
        if load is not None:
            load.join()
    return {
        key: {"wall": statistics.median(w for w, _ in v), "cpu": statistics.median(c for _, c in v)}
        for key, v in runs.items()
    }


def measure(names, batches, seconds, rounds, learner_batch, busy) -> dict:
    rng = np.random.default_rng(0)
    return {
        name: _measure_net(name, batches, seconds, rounds, learner_batch, busy, rng)
        for name in names
    }


def print_table(results: dict, batches, busy: bool) -> None:
    print(f"\nms per agent step (wall / CPU), medians; x = wall as a multiple of the learner's "
          f"forward pass per sample{' (beside a busy learner)' if busy else ''}")  # fmt: skip
    for name, runs in results.items():
        ref = runs["learner_forward"]
        print(f"\n{name}: learner forward {ref['wall']:.4f} / {ref['cpu']:.4f} ms per sample")
        impls = sorted({k.split("@")[0] for k in runs if "@" in k})
        print("| batch | " + " | ".join(impls) + " | fastest |")
        print("|---|" + "---|" * (len(impls) + 1))
        for batch in batches:
            cells, best = [], None
            for impl in impls:
                r = runs[f"{impl}@{batch}"]
                cells.append(f"{r['wall']:.4f} / {r['cpu']:.4f} ({r['wall'] / ref['wall']:.1f}x)")
                if best is None or r["wall"] < runs[f"{best}@{batch}"]["wall"]:
                    best = impl
            print(f"| {batch} | " + " | ".join(cells) + f" | {best} |")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--nets", default="small_atari_cnn,nature_cnn,minatar_cnn,mlp,mlp_256")
    p.add_argument("--batches", default="1,4,8,16,32,64")
    p.add_argument("--seconds", type=float, default=0.5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--learner_batch", type=int, default=256)
    p.add_argument("--busy", action="store_true", help="a learner-like load beside the timing")
    args = p.parse_args(argv)
    names = [n for n in args.nets.split(",") if n]
    bad = [n for n in names if n not in NETS]
    if bad:
        p.exit(2, f"error: --nets: unknown {bad}; expected some of {sorted(NETS)}\n")
    try:
        batches = [int(b) for b in args.batches.split(",") if b]
    except ValueError:
        p.exit(2, f"error: --batches: expected ints, received {args.batches!r}\n")
    if not batches or min(batches) < 1 or args.rounds < 1 or args.seconds <= 0:
        p.exit(2, "error: --batches, --rounds and --seconds: expected values >= 1 (> 0)\n")
    print(machine_line(), flush=True)
    start = time.time()
    results = measure(names, batches, args.seconds, args.rounds, args.learner_batch, args.busy)
    print_table(results, batches, args.busy)
    print(json.dumps({"results": results, "busy": args.busy, "wall_time": time.time() - start}))


if __name__ == "__main__":
    main()
