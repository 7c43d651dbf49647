"""Benchmark of V-trace (`from_importance_weights`) against a scalable_agent-style reference.

Columns, all computing ``vs`` and ``pg_advantages`` over time-major [T, B] float32 inputs:
  (a) ref scan   the way scalable_agent writes it: ``tf.scan`` over ``(discounts, cs,
                 deltas)`` with ``parallel_iterations=1``, in a ``tf.function`` (graph mode);
  (b) ours       ``tfagents_vtrace.ops.vtrace.from_importance_weights`` in ``tf.function``;
  (c) ours XLA   the same under ``tf.function(jit_compile=True)``;
  (d) rlax       ``rlax.vtrace_td_error_and_advantage`` under ``jax.jit(jax.vmap(...))`` over
                 the batch, when jax and rlax import (the column is skipped otherwise);
  (e) floor      a trivial ``tf.function(jit_compile=True)`` with the same inputs and outputs:
                 the fixed cost of a call, which (c) cannot go below.

The runs are interleaved round-robin (one timed sample of every column, then the next), each
call is synchronised and the table shows the median time per call and the ratios a/b, a/c
and d/c. Synchronisation leaves the outputs where each framework computed them: a TF call on
CPU returns when its outputs are written (eager execution is synchronous; the benchmark checks
it) and jax waits in ``block_until_ready``. Neither side copies its outputs into new numpy
arrays (``EagerTensor.numpy()`` copies; ``--copy_outputs`` adds that copy to the TF columns,
about 0.5 ms per call at (100, 4096), to show the cost). The first line names the machine
(``benchmarks/machine.py``: CPU model, cores, ISA flags). Usage::

    python benchmarks/ops_bench.py [--quick] [--samples N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a source checkout
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
from machine import machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from tfagents_vtrace.ops import vtrace  # noqa: E402

SIZES = ((20, 32), (100, 256), (100, 4096))


def reference_vtrace(log_rhos, discounts, rewards, values, bootstrap_value):
    """V-trace as scalable_agent computes it (thresholds 1.0): a reversed tf.scan."""
    rhos = tf.exp(log_rhos)
    clipped_rhos = tf.minimum(1.0, rhos)
    cs = tf.minimum(1.0, rhos)
    values_t_plus_1 = tf.concat([values[1:], tf.expand_dims(bootstrap_value, 0)], axis=0)
    deltas = clipped_rhos * (rewards + discounts * values_t_plus_1 - values)

    def step(acc, item):
        discount_t, c_t, delta_t = item
        return delta_t + discount_t * c_t * acc

    vs_minus_v_xs = tf.scan(
        step,
        (discounts, cs, deltas),
        initializer=tf.zeros_like(bootstrap_value),
        parallel_iterations=1,
        reverse=True,
    )
    vs = vs_minus_v_xs + values
    vs_t_plus_1 = tf.concat([vs[1:], tf.expand_dims(bootstrap_value, 0)], axis=0)
    pg_advantages = tf.minimum(1.0, rhos) * (rewards + discounts * vs_t_plus_1 - values)
    return tf.stop_gradient(vs), tf.stop_gradient(pg_advantages)


def ours(log_rhos, discounts, rewards, values, bootstrap_value):
    out = vtrace.from_importance_weights(log_rhos, discounts, rewards, values, bootstrap_value)
    return out.vs, out.pg_advantages


def call_floor(log_rhos, discounts, rewards, values, bootstrap_value):
    """Column (e): the cost of calling any XLA function with these inputs and outputs."""
    return values + log_rhos, rewards + discounts


def make_inputs(t: int, b: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    log_rhos = rng.normal(0.0, 0.5, (t, b))
    discounts = 0.99 * (rng.uniform(size=(t, b)) > 0.05)  # some episode ends
    rewards = rng.normal(size=(t, b))
    values = rng.normal(size=(t, b))
    bootstrap_value = rng.normal(size=(b,))
    arrays = [log_rhos, discounts, rewards, values, bootstrap_value]
    return [a.astype(np.float32) for a in arrays]


def make_rlax_column(arrays):
    """A zero-argument callable running rlax under jit(vmap), or None without jax/rlax."""
    try:
        import jax
        import jax.numpy as jnp
        import rlax
    except Exception as e:  # noqa: BLE001 - any import failure skips the column
        print(f"(d) rlax skipped: {type(e).__name__}: {e}")
        return None
    log_rhos, discounts, rewards, values, bootstrap_value = arrays
    v_t = np.concatenate([values[1:], bootstrap_value[None]], axis=0)

    def one(v_tm1, v_t, r_t, discount_t, rho_tm1):
        out = rlax.vtrace_td_error_and_advantage(v_tm1, v_t, r_t, discount_t, rho_tm1)
        return out.errors + v_tm1, out.pg_advantage  # vs and pg advantages

    fn = jax.jit(jax.vmap(one, in_axes=1, out_axes=1))
    args = [jnp.asarray(a) for a in (values, v_t, rewards, discounts, np.exp(log_rhos))]
    return lambda: jax.block_until_ready(fn(*args))


def check_agreement(columns) -> None:
    """All columns must give the same numbers before they are timed."""
    want = [np.asarray(x) for x in columns["a"]()]
    for key, fn in columns.items():
        if key == "e":
            continue
        got = [np.asarray(x) for x in fn()]
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=f"column {key}")


def bench_size(
    t: int, b: int, samples: int, calls: int, copy_outputs: bool = False
) -> dict[str, float]:
    arrays = make_inputs(t, b)
    tensors = [tf.constant(a) for a in arrays]
    tf_fns = {
        "a": tf.function(reference_vtrace),
        "b": tf.function(ours),
        "c": tf.function(ours, jit_compile=True),
        "e": tf.function(call_floor, jit_compile=True),
    }
    if copy_outputs:
        columns = {k: (lambda f=f: [x.numpy() for x in f(*tensors)]) for k, f in tf_fns.items()}
    else:
        columns = {k: (lambda f=f: f(*tensors)) for k, f in tf_fns.items()}
    rlax_fn = make_rlax_column(arrays)
    if rlax_fn is not None:
        columns["d"] = rlax_fn
    check_agreement(columns)
    for fn in columns.values():  # warm up (tracing, compilation, caches)
        for _ in range(3):
            fn()
    times = {k: [] for k in columns}
    for _ in range(samples):  # round-robin: one sample of each column in turn
        for key, fn in columns.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            times[key].append((time.perf_counter() - start) / calls)
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few samples, for a smoke run")
    parser.add_argument("--samples", type=int, default=None, help="timed samples per column")
    parser.add_argument(
        "--threads", type=int, default=0, help="TF intra/inter-op threads (0: TF's default)"
    )
    parser.add_argument(
        "--calls",
        type=int,
        default=10,
        help="back-to-back calls per timed sample (the mean is one sample); columns still "
        "alternate every sample. 1 times each call cold, right after another column ran",
    )
    parser.add_argument(
        "--copy_outputs",
        action="store_true",
        help="also copy the TF columns' outputs into numpy arrays (EagerTensor.numpy())",
    )
    args = parser.parse_args(argv)
    if not tf.config.experimental.get_synchronous_execution():
        raise SystemExit("eager execution must be synchronous for these timings")
    if args.threads:
        tf.config.threading.set_intra_op_parallelism_threads(args.threads)
        tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    samples = args.samples or (5 if args.quick else 40)
    threads = args.threads or "default"
    print(machine_line(), flush=True)
    print(
        f"tensorflow {tf.__version__}, threads {threads}, {samples} interleaved samples per column"
    )
    print(f"load average before: {os.getloadavg()[0]:.2f}; times are medians in ms per call")
    print(f"each sample: {1 if args.quick else args.calls} back-to-back calls of one column")
    print(f"TF outputs copied to numpy: {'yes' if args.copy_outputs else 'no'}")
    header = (
        "(T, B)      | (a) ref scan | (b) ours | (c) ours XLA | (d) rlax | (e) floor "
        "| a/b   | a/c   | d/c"
    )
    rows = []
    for t, b in SIZES:
        med = bench_size(t, b, samples, 1 if args.quick else args.calls, args.copy_outputs)
        d = med.get("d")
        d_ms = f"{d * 1e3:8.3f}" if d is not None else "       -"
        d_c = f"{d / med['c']:5.2f}" if d is not None else "    -"
        rows.append(
            f"({t:3d}, {b:4d}) | {med['a'] * 1e3:12.3f} | {med['b'] * 1e3:8.3f} | "
            f"{med['c'] * 1e3:12.3f} | {d_ms} | {med['e'] * 1e3:9.3f} | "
            f"{med['a'] / med['b']:5.2f} | "
            f"{med['a'] / med['c']:5.2f} | {d_c}"
        )
        print(rows[-1], flush=True)
    print()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(header)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
