"""The backward linear recursion every return op is built on, tuned per execution mode.

``acc_t = deltas_t + coeffs_t * acc_{t+1}`` over time-major tensors. Under XLA one loop
iteration per step fuses into a multiply-add per row; in graph mode and eagerly the per-op
cost dominates, so steps run in unrolled chunks (see ``reverse_recurrence``).
"""

from __future__ import annotations

import math

import tensorflow as tf

# Most time steps per iteration of the graph-mode loop (its body is unrolled that often).
_MAX_CHUNK = 16
# Rows (B * C elements) at least this large skip the chunking (it costs extra copies).
_LARGE_ROW = 2048


def reverse_recurrence(coeffs: tf.Tensor, deltas: tf.Tensor) -> tf.Tensor:
    """Solves ``acc_t = deltas_t + coeffs_t * acc_{t+1}`` backwards in time, ``acc_T = 0``.

    ``coeffs`` and ``deltas`` are time-major ``[T, ...]`` of one shape; the result too.
    Under XLA, and in graph mode for large rows (where memory traffic, not the per-op cost,
    dominates): one loop iteration per step, a fused multiply-add per row under XLA.
    Otherwise graph mode pays per executed op, so the steps run in chunks: one iteration
    reads a chunk of rows with one gather and runs its steps unrolled (`_chunked_recurrence`).
    """
    row_size = coeffs.shape[1:].num_elements()
    if not in_xla_context() and (row_size is None or row_size < _LARGE_ROW):
        return _chunked_recurrence(coeffs, deltas)
    num_steps = tf.shape(coeffs)[0]
    outputs = tf.TensorArray(deltas.dtype, size=num_steps, element_shape=deltas.shape[1:])

    def body(t, acc, outputs):
        acc = tf.gather(deltas, t) + tf.gather(coeffs, t) * acc
        return t - 1, acc, outputs.write(t, acc)

    _, _, outputs = tf.while_loop(
        lambda t, acc, outputs: t >= 0,
        body,
        (num_steps - 1, tf.zeros_like(deltas[0]), outputs),
        maximum_iterations=num_steps,  # XLA needs a bound to differentiate the loop
    )
    return outputs.stack()


def _chunked_recurrence(coeffs: tf.Tensor, deltas: tf.Tensor) -> tf.Tensor:
    """`reverse_recurrence` in chunks of K <= `_MAX_CHUNK` steps (graph mode and eager).

    The trace is front-padded with zeros to ``n * K`` steps (zeros before the first step
    cannot reach it: the recursion runs backwards) and viewed as ``[n, K, ...]``. A trace of
    at most `_MAX_CHUNK` steps needs no loop at all.
    """
    num_steps = coeffs.shape[0]
    if num_steps is not None and num_steps <= _MAX_CHUNK:
        return _unrolled(tf.unstack(coeffs), tf.unstack(deltas), tf.zeros_like(deltas[0]))[0]
    k = _MAX_CHUNK
    if num_steps is not None:  # static T: a divisor of T if one is close, else least padding
        divisors = [d for d in range(_MAX_CHUNK // 2, _MAX_CHUNK + 1) if num_steps % d == 0]
        k = divisors[-1] if divisors else math.ceil(num_steps / math.ceil(num_steps / _MAX_CHUNK))
    steps = tf.shape(coeffs)[0]
    num_chunks = (steps + k - 1) // k
    pad = num_chunks * k - steps
    rest = tf.shape(coeffs)[1:]
    if num_steps is not None and num_steps % k == 0:
        padded = (coeffs, deltas)
    else:
        paddings = tf.concat([[[pad, 0]], tf.zeros([tf.rank(coeffs) - 1, 2], tf.int32)], axis=0)
        padded = (tf.pad(coeffs, paddings), tf.pad(deltas, paddings))
    chunked = [tf.reshape(x, tf.concat([[num_chunks, k], rest], 0)) for x in padded]
    outputs = tf.TensorArray(deltas.dtype, size=num_chunks)

    def body(i, acc, outputs):
        rows = [tf.unstack(tf.gather(x, i), num=k) for x in chunked]
        chunk, acc = _unrolled(*rows, acc)
        return i - 1, acc, outputs.write(i, chunk)

    _, _, outputs = tf.while_loop(
        lambda i, acc, outputs: i >= 0,
        body,
        (num_chunks - 1, tf.zeros_like(deltas[0]), outputs),
        parallel_iterations=1,
    )
    result = tf.reshape(outputs.stack(), tf.concat([[num_chunks * k], rest], 0))
    return result if num_steps is not None and num_steps % k == 0 else result[pad:]


def _unrolled(coeffs: list, deltas: list, acc: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """The recursion over lists of rows, unrolled; returns (stacked rows, the first row)."""
    out = [None] * len(coeffs)
    for k in reversed(range(len(coeffs))):
        acc = deltas[k] + coeffs[k] * acc
        out[k] = acc
    return tf.stack(out), acc


def in_xla_context() -> bool:
    """True while tracing for XLA (inside ``tf.function(jit_compile=True)``)."""
    get_context = getattr(tf.__internal__, "get_enclosing_xla_context", None)
    return get_context is not None and get_context() is not None


def reverse_linear_recurrence(xs: tf.Tensor, coeffs: tf.Tensor, init: tf.Tensor) -> tf.Tensor:
    """Solves ``y_t = x_t + coeffs_t * y_{t+1}`` backwards in time, with ``y_T = init``.

    Args:
      xs: [T, ...] float tensor.
      coeffs: [T, ...] float tensor of the same shape.
      init: [...] float tensor, the value of ``y_T``.

    Returns:
      [T, ...] tensor ``y_0 .. y_{T-1}``. Gradients flow to every input (callers stop them).
    """
    # y_T enters only through step T-1: fold coeffs_{T-1} * init into x_{T-1}.
    last = xs[-1:] + coeffs[-1:] * init[tf.newaxis]
    return reverse_recurrence(coeffs, tf.concat([xs[:-1], last], axis=0))
