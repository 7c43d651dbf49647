"""Export latency: batch-1 step of the SavedModel vs LiteRT vs ONNX Runtime, medians, ratios.

One acting step at batch size 1, numpy in and numpy out, the recurrent state fed back each
step, of an MLP policy (CartPole-sized: 4 observations, 2 actions, the default 64x64 torso),
an LSTM policy (64 torso + LSTM 128 with the previous action and reward) and the IMPALA
ResNet + LSTM 256 on 84x84x4 uint8 frames with 6 actions (the GPU Pong config's): the same
computation in every runtime, the sampling step with explicit noise (the SavedModel's
``action_from_noise``, LiteRT's ``action``, the ONNX graph), through
``tfagents_vtrace.export.parity``'s runners. Runtimes are interleaved round by round so load
from other processes hits them alike; the table prints the median step time over all rounds
and its ratio to the SavedModel's, then one JSON line; the machine (``benchmarks/machine.py``:
CPU model, cores, ISA flags) is the first line. ONNX Runtime is skipped when the
``onnx`` extra is not installed (LiteRT needs the ``litert`` extra).

    python benchmarks/export_latency.py [--rounds=7] [--steps=300] [--threads=1]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
from machine import machine_info, machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

POLICIES = {
    "mlp": dict(),
    "lstm": dict(hidden_sizes=(64,), core="lstm", lstm_size=128, use_prev_action=True,
                 use_prev_reward=True),
    # The IMPALA deep ResNet + LSTM on Atari frames (impala_atari_pong_resnet_lstm_gpu.cfg).
    "resnet_lstm": dict(torso="impala_resnet", core="lstm", lstm_size=256,
                        use_prev_action=True, use_prev_reward=True),
}  # fmt: skip
SPACES = {  # observation space, number of actions
    "mlp": (gym.spaces.Box(-5.0, 5.0, (4,), np.float32), 2),
    "lstm": (gym.spaces.Box(-5.0, 5.0, (4,), np.float32), 2),
    "resnet_lstm": (gym.spaces.Box(0, 255, (84, 84, 4), np.uint8), 6),
}


def _runners(name: str, directory: str, threads: int) -> dict:
    """Runtime -> runner of the same policy (see the module docstring)."""
    from tfagents_vtrace.export import parity
    from tfagents_vtrace.export.litert import export_tflite
    from tfagents_vtrace.export.onnx import export_onnx
    from tfagents_vtrace.export.saved_model import export_policy
    from tfagents_vtrace.networks import NetworkConfig, make_network

    obs, actions = SPACES[name]
    net = make_network(NetworkConfig(**POLICIES[name]), obs, gym.spaces.Discrete(actions))
    path = os.path.join(directory, name)
    runners = {"saved_model": parity.SavedModelRunner(export_policy(net, path))}
    runners["litert"] = parity.LiteRTRunner(export_tflite(net, path + ".tflite"), threads)
    if all(importlib.util.find_spec(m) for m in ("tf2onnx", "onnxruntime")):
        runners["onnxruntime"] = parity.OnnxRunner(export_onnx(net, path + ".onnx"), threads)
    return runners


def _time_steps(runner, steps: int, rng: np.random.Generator, name: str = "mlp") -> list[float]:
    """Seconds per step of ``steps`` batch-1 steps of policy ``name``, the state carried."""
    space, actions = SPACES[name]
    state = runner.initial_state(1)
    inputs = {
        "first": np.array([True]),
        "prev_action": np.zeros(1, np.int32),
        "prev_reward": np.zeros(1, np.float32),
    }
    if space.dtype == np.uint8:
        observations = rng.integers(0, 256, size=(steps, 1, *space.shape), dtype=np.uint8)
    else:
        observations = rng.normal(size=(steps, 1, *space.shape)).astype(np.float32)
    noise = rng.random((steps, 1, actions), dtype=np.float32)
    times = []
    for t in range(steps):
        start = time.perf_counter()
        out = runner.sample({**inputs, "observation": observations[t], **state}, noise[t])
        times.append(time.perf_counter() - start)
        state = {k: v for k, v in out.items() if k.startswith("state_")}
        inputs = {"first": np.array([False]), "prev_action": np.asarray(out["action"], np.int32),
                  "prev_reward": np.ones(1, np.float32)}  # fmt: skip
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="Interleaved rounds.")
    parser.add_argument("--steps", type=int, default=300, help="Steps per runtime per round.")
    parser.add_argument("--threads", type=int, default=1, help="Threads of every runtime.")
    args = parser.parse_args()
    if importlib.util.find_spec("ai_edge_litert") is None:
        raise SystemExit("error: LiteRT needs the litert extra: pip install '.[litert]'")
    print(machine_line(), flush=True)
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    rng = np.random.default_rng(0)
    results = {}
    with tempfile.TemporaryDirectory(prefix="export-latency-") as directory:
        for name in POLICIES:
            runners = _runners(name, directory, args.threads)
            samples = {k: [] for k in runners}
            for runner in runners.values():  # warm-up (tracing, allocation)
                _time_steps(runner, 20, rng, name)
            for _ in range(args.rounds):
                for k, runner in runners.items():
                    samples[k] += _time_steps(runner, args.steps, rng, name)
            medians = {k: statistics.median(v) for k, v in samples.items()}
            results[name] = {
                k: {"median_us": round(m * 1e6, 1),
                    "ratio_to_saved_model": round(m / medians["saved_model"], 3)}
                for k, m in medians.items()
            }  # fmt: skip
    print(f"{'policy':11s} {'runtime':12s} {'median us':>10s} {'vs SavedModel':>14s}")
    for name, rows in results.items():
        for runtime, row in rows.items():
            ratio = row["ratio_to_saved_model"]
            print(f"{name:11s} {runtime:12s} {row['median_us']:10.1f} {ratio:13.3f}x")
    print(json.dumps({"batch_size": 1, "threads": args.threads, "rounds": args.rounds,
                      "steps": args.steps, "results": results,
                      "machine": machine_info()}))  # fmt: skip


if __name__ == "__main__":
    main()
