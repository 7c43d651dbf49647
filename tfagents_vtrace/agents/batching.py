"""Batches into compiled learner steps: flat per-dtype buffers (:class:`BatchFunction`),
splitting a batch over replicas and taking whole unrolls (columns) out of it.

Unroll batches are the runtime's layout (:mod:`tfagents_vtrace.runtime.acting.actor`): entries
``[T(+1), B, ...]`` and ``state``, a tuple of ``[B, ...]`` arrays.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import tensorflow as tf


def local_replicas(strategy: tf.distribute.Strategy) -> int:
    """The replicas on this worker: all of them, except under a multi-worker strategy, whose
    workers each feed their own devices from their own host batch."""
    if strategy.num_replicas_in_sync == 1:
        return 1
    try:
        return len(strategy.extended.worker_devices)
    except (RuntimeError, NotImplementedError, AttributeError):
        return strategy.num_replicas_in_sync


def distribute_batch(strategy: tf.distribute.Strategy, batch: dict):
    """Splits this worker's numpy unroll batch over its replicas along B.

    Every entry is ``[T(+1), B, ...]`` (split on axis 1) except ``batch["state"]``, a tuple of
    ``[B, ...]`` arrays (split on axis 0). Under a multi-worker strategy every worker passes
    its own batch (from its own actors) and it is split over that worker's replicas only:
    replica ids are global there (``worker * local + i``), so the column offset is the id
    modulo the local count. Raises ValueError when B is not divisible by the local replicas.
    """
    n = local_replicas(strategy)
    b = int(np.shape(batch["reward"])[1])
    if b % n:
        raise ValueError(f"batch: B={b} must be divisible by the {n} replicas")
    k = b // n

    def part(ctx):
        lo = (ctx.replica_id_in_sync_group % n) * k
        out = {
            key: tf.nest.map_structure(lambda x: x[:, lo : lo + k], val)
            for key, val in batch.items()
            if key != "state"
        }
        out["state"] = tuple(x[lo : lo + k] for x in batch["state"])
        return out

    return strategy.experimental_distribute_values_from_function(part)


class BatchFunction:
    """``fn(batch, *args)`` compiled once per signature and called with little Python.

    ``batch`` is a nest (dicts, tuples) of numpy arrays, e.g. the runtime's unroll layout;
    ``args`` are a few tensors or numbers (e.g. an entropy weight). Each signature (batch
    structure, leaf shapes and dtypes, args' shapes and dtypes) is traced once into a
    concrete function. The batch crosses into TensorFlow as one flat array per dtype (the
    leaves concatenated on the host, split and reshaped again inside the graph).

    Calling a ``tf.function`` with the nested numpy batch instead costs a trace-type lookup
    and one Python-level conversion per leaf on every call, more than a whole CartPole update
    (docs/results/implementation_choices.md).
    """

    def __init__(self, fn: Callable, jit_compile: bool = False):
        self._fn = fn
        self._jit = bool(jit_compile)
        self._concrete: dict[tuple, tuple[Callable, list[list[int]]]] = {}

    def __call__(self, batch, *args):
        leaves = [np.asarray(x) for x in tf.nest.flatten(batch)]
        args = [tf.convert_to_tensor(a) for a in args]
        key = (
            _structure_key(batch),
            *((a.shape, a.dtype.str) for a in leaves),
            *((tuple(a.shape), a.dtype.name) for a in args),
        )
        entry = self._concrete.get(key)
        if entry is None:
            entry = self._concrete[key] = self._trace(batch, leaves, args)
        step, groups = entry
        buffers = [tf.constant(np.concatenate([leaves[i].ravel() for i in idx])) for idx in groups]
        return step(*buffers, *args)

    def _trace(self, structure, leaves: list[np.ndarray], args: list[tf.Tensor]):
        """``(concrete function of the flat per-dtype buffers and args, leaf indices per
        buffer)``."""
        by_dtype: dict[str, list[int]] = {}
        for i, a in enumerate(leaves):
            by_dtype.setdefault(a.dtype.str, []).append(i)
        groups = list(by_dtype.values())

        def flat_fn(*inputs):
            buffers, rest = inputs[: len(groups)], inputs[len(groups) :]
            out = [None] * len(leaves)
            for buffer, idx in zip(buffers, groups):
                sizes = [int(leaves[i].size) for i in idx]
                for i, part in zip(idx, tf.split(buffer, sizes)):
                    out[i] = tf.reshape(part, leaves[i].shape)
            return self._fn(tf.nest.pack_sequence_as(structure, out), *rest)

        specs = [
            tf.TensorSpec(
                [sum(int(leaves[i].size) for i in idx)], tf.as_dtype(leaves[idx[0]].dtype)
            )
            for idx in groups
        ] + [tf.TensorSpec(a.shape, a.dtype) for a in args]
        traced = tf.function(flat_fn, jit_compile=self._jit, autograph=False)
        return traced.get_concrete_function(*specs), groups


def _structure_key(nest) -> object:
    """A hashable description of a nest's structure (dict keys, sequence types and lengths)."""
    if isinstance(nest, dict):
        return tuple((k, _structure_key(nest[k])) for k in sorted(nest))
    if isinstance(nest, list | tuple):
        return (type(nest).__name__, tuple(_structure_key(v) for v in nest))
    return None


def take_columns(batch: dict, idx, take) -> dict:
    """The columns ``idx`` of an unroll batch: whole unrolls, every step of each kept.

    Entries are ``[T(+1), B, ...]`` (taken on axis 1) except ``batch["state"]``, a tuple of
    ``[B, ...]`` arrays (axis 0). ``take`` is ``tf.gather`` or ``np.take``."""
    out = {}
    for key, value in batch.items():
        if key == "state":
            out[key] = tuple(take(s, idx, axis=0) for s in value)
        else:
            out[key] = tf.nest.map_structure(lambda x: take(x, idx, axis=1), value)
    return out
