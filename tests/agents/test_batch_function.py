"""agents.batching.BatchFunction: a nested numpy batch through flat per-dtype buffers."""

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.batching import BatchFunction


def _batch(rng, t=3, b=4):
    return {
        "observation": rng.normal(size=(t + 1, b, 2)).astype(np.float32),
        "action": rng.integers(0, 5, size=(t, b)).astype(np.int32),
        "first": rng.random((t + 1, b)) < 0.5,
        "reward": rng.normal(size=(t, b)).astype(np.float32),
        "policy": {"logits": rng.normal(size=(t, b, 5)).astype(np.float32)},
        "state": (rng.normal(size=(b, 3)).astype(np.float32),),
        "empty": (),
    }


@pytest.mark.parametrize("jit_compile", [False, True])
def test_leaves_arrive_unchanged_and_each_signature_traces_once(jit_compile):
    rng = np.random.default_rng(0)
    traces = []

    def fn(batch, scale):
        traces.append(1)
        return {
            "leaves": tf.nest.map_structure(tf.identity, batch),
            "scaled": batch["reward"] * scale,
        }

    compiled = BatchFunction(fn, jit_compile=jit_compile)
    for _ in range(3):
        batch = _batch(rng)
        out = compiled(batch, 2.0)
        got = tf.nest.map_structure(lambda x: x.numpy(), out["leaves"])
        tf.nest.map_structure(np.testing.assert_array_equal, got, batch)
        for name in ("action", "first"):
            assert got[name].dtype == batch[name].dtype
        np.testing.assert_allclose(out["scaled"].numpy(), 2.0 * batch["reward"])
    assert len(traces) == 1
    compiled(_batch(rng, b=6), 2.0)  # a new shape is a new signature
    assert len(traces) == 2
