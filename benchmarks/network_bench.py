"""Network benchmark: acting-step latency and learner throughput, interleaved, medians.

Acting: one policy step (forward + sample) of an MLP and an LSTM policy (CartPole-sized
observations, 2 actions) at batch 1, 16 and 64, run eagerly, as a ``tf.function``, as a
``tf.function(jit_compile=True)`` and through the exported SavedModel loaded with
``tf.saved_model.load``. Learner: forward + backward of the IMPALA deep ResNet + LSTM on
``[T=20, B=32]`` 84x84x4 uint8 frames, with and without XLA. Variants are interleaved round
by round so load from other processes hits them alike; the table prints medians and ratios
against the in-process ``tf.function`` step (acting) and the non-XLA step (learner).

    python benchmarks/network_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfagents_vtrace.export.actor_critic import ActorCriticPolicy  # noqa: E402
from tfagents_vtrace.export.saved_model import export_policy  # noqa: E402
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from machine import machine_line  # noqa: E402

sys.path.remove(os.path.dirname(os.path.abspath(__file__)))  # minatar.py shadows a package

OBS = gym.spaces.Box(-5.0, 5.0, (4,), np.float32)
ACT = gym.spaces.Discrete(2)


def _acting_variants(net, batch: int, export_dir: str) -> dict:
    """One acting step (forward, sample, log-prob, new state) on fixed inputs, per variant.

    Every variant runs the same computation, the exported policy's ``action``: eagerly, as
    the in-process ``tf.function`` (ActorCriticPolicy), XLA-compiled, and from the SavedModel
    loaded back (structured ``action`` and the flat ``action`` signature).
    """
    rng = np.random.default_rng(0)
    module = ActorCriticPolicy(net)
    args = (
        tf.constant(rng.normal(size=(batch, 4)).astype(np.float32)),
        tf.zeros([batch], tf.bool),
        tf.zeros([batch], tf.int32),
        tf.zeros([batch], tf.float32),
        tuple(module.get_initial_state(tf.constant(batch))),
    )
    kw = dict(zip(["observation", "first", "prev_action", "prev_reward", "state"], args))
    flat_kw = {k: v for k, v in kw.items() if k != "state"}
    flat_kw.update({f"state_{i}": s for i, s in enumerate(args[4])})
    eager = module.action.python_function
    xla = tf.function(eager, jit_compile=True)
    policy = tf.saved_model.load(export_dir)
    signature = policy.signatures["action"]
    return {
        "eager": lambda: eager(**kw),
        "tf.function": lambda: module.action(**kw),
        "xla": lambda: xla(**kw),
        "savedmodel": lambda: policy.action(**kw),
        "signature": lambda: signature(**flat_kw),
    }


def _time_per_call(fn, calls: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        out = fn()
    tf.nest.map_structure(lambda x: x.numpy() if hasattr(x, "numpy") else x, out)
    return (time.perf_counter() - start) / calls


def bench_acting(rounds: int, calls: int, batches=(1, 16, 64)) -> list[tuple]:
    rows = []
    tmp = tempfile.mkdtemp()
    for name, cfg in [("mlp", NetworkConfig()), ("lstm", NetworkConfig(core="lstm"))]:
        net = make_network(cfg, OBS, ACT)
        path = export_policy(net, os.path.join(tmp, name))
        for batch in batches:
            variants = _acting_variants(net, batch, path)
            times = {k: [] for k in variants}
            for _ in range(rounds):  # interleaved
                for k, fn in variants.items():
                    n = max(2, calls // 10) if k == "eager" else calls
                    times[k].append(_time_per_call(fn, n))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((name, batch, med))
    return rows


def bench_learner(rounds: int, T: int = 20, B: int = 32) -> dict:
    cfg = NetworkConfig(torso="impala_resnet", core="lstm", lstm_size=256)
    frames = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
    net = make_network(cfg, frames, gym.spaces.Discrete(6))
    rng = np.random.default_rng(0)
    inputs = NetInputs(
        tf.constant(rng.integers(0, 256, size=(T, B, 84, 84, 4)).astype(np.uint8)),
        tf.constant(rng.random((T, B)) < 0.05),
        tf.constant(rng.integers(0, 6, size=(T, B)).astype(np.int32)),
        tf.zeros([T, B], tf.float32),
    )
    state = net.initial_state(B)
    variables = net.trainable_variables

    def train_step(inputs, state):
        with tf.GradientTape() as tape:
            out = net.unroll(inputs, state)
            logp = tf.nn.log_softmax(out.policy["logits"])
            loss = tf.reduce_mean(tf.square(out.value)) - tf.reduce_mean(logp[..., 0])
        grads = tape.gradient(loss, variables)
        return loss, tf.linalg.global_norm(grads)

    variants = {
        "tf.function": tf.function(train_step),
        "xla": tf.function(train_step, jit_compile=True),
    }
    times = {k: [] for k in variants}
    for fn in variants.values():
        fn(inputs, state)[0].numpy()  # compile
    for _ in range(rounds):
        for k, fn in variants.items():
            start = time.perf_counter()
            fn(inputs, state)[0].numpy()
            times[k].append(time.perf_counter() - start)
    return {k: (T * B / statistics.median(v), statistics.median(v)) for k, v in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and calls")
    parser.add_argument("--part", choices=["all", "acting", "learner"], default="all")
    args = parser.parse_args()
    rounds, calls, learn_rounds = (5, 50, 2) if args.quick else (11, 200, 5)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(machine_line())
    print(f"TF {tf.__version__}, {os.cpu_count()} CPUs, load average at start: {load}")

    if args.part in ("all", "acting"):
        print_acting(bench_acting(rounds, calls), rounds)
    if args.part in ("all", "learner"):
        print_learner(bench_learner(learn_rounds), learn_rounds)


def print_acting(acting: list, rounds: int) -> None:
    print(f"\n## Acting step latency (median of {rounds} interleaved rounds; us per call)\n")
    names = ["eager", "tf.function", "xla", "savedmodel", "signature"]
    print("| net | batch | " + " | ".join(names) + " | eager/tf.function "
          "| savedmodel/tf.function | signature/tf.function | xla/tf.function |")  # fmt: skip
    print("|---" * (len(names) + 6) + "|")
    for name, batch, m in acting:
        us = {k: v * 1e6 for k, v in m.items()}
        g = us["tf.function"]
        cells = " | ".join(f"{us[k]:.0f}" for k in names)
        ratios = " | ".join(
            f"{us[k] / g:.2f}x" for k in ("eager", "savedmodel", "signature", "xla")
        )
        print(f"| {name} | {batch} | {cells} | {ratios} |")


def print_learner(learner: dict, learn_rounds: int) -> None:
    print(
        f"\n## Learner: IMPALA ResNet + LSTM forward+backward, [T=20, B=32] 84x84x4 uint8 "
        f"(median of {learn_rounds})\n"
    )
    print("| variant | step (s) | samples/s | ratio vs tf.function |")
    print("|---|---|---|---|")
    base = learner["tf.function"][0]
    for k, (sps, sec) in learner.items():
        print(f"| {k} | {sec:.3f} | {sps:.0f} | {sps / base:.2f}x |")


if __name__ == "__main__":
    main()
