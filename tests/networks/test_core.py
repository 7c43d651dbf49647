"""LSTMCore against a slow numpy LSTM with resets and a time-step counter."""

import numpy as np
import pytest
import tensorflow as tf

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.networks import LSTMCore, reset_where_first


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def numpy_lstm_unroll(x, first, h, c, t, kernel, recurrent, bias, scale, use_time):
    """Hochreiter & Schmidhuber LSTM (Keras gate order i, f, g, o), state zeroed where first."""
    ys = []
    h, c, t = h.copy(), c.copy(), t.copy()
    for step in range(x.shape[0]):
        for b in range(x.shape[1]):
            if first[step, b]:
                h[b], c[b], t[b] = 0.0, 0.0, 0.0
        inp = x[step]
        if use_time:
            inp = np.concatenate([inp, scale * t], axis=-1)
        z = inp @ kernel + h @ recurrent + bias
        i, f, g, o = np.split(z, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        t = t + 1.0
        ys.append(h.copy())
    return np.stack(ys), h, c, t


@pytest.mark.parametrize("mode", RUN_MODES)
@pytest.mark.parametrize("use_time", [False, True])
def test_unroll_matches_numpy_with_reset(mode, use_time, rng):
    T, B, F, H = 6, 3, 5, 4
    core = LSTMCore(H, use_time_step=use_time, time_step_scale=0.1)
    x = rng.normal(size=(T, B, F)).astype(np.float32)
    first = np.zeros((T, B), bool)
    first[0, 0] = True
    first[3, 1] = True  # an episode boundary in the middle of the unroll, entry 1 only
    state = tuple(rng.normal(size=(B, n)).astype(np.float32) for n in core.state_sizes)
    if use_time:
        state = state[:2] + (np.array([[5.0], [2.0], [0.0]], np.float32),)
    ys, final = run_in_mode(core.unroll, mode)(tf.constant(x), tf.constant(first), state)
    kernel, recurrent, bias = (w.numpy() for w in core.cell.weights)
    t0 = state[2] if use_time else np.zeros((B, 1), np.float32)
    ref_y, ref_h, ref_c, ref_t = numpy_lstm_unroll(
        x, first, state[0], state[1], t0, kernel, recurrent, bias, 0.1, use_time
    )
    np.testing.assert_allclose(ys.numpy(), ref_y, atol=1e-5)
    np.testing.assert_allclose(final[0].numpy(), ref_h, atol=1e-5)
    np.testing.assert_allclose(final[1].numpy(), ref_c, atol=1e-5)
    if use_time:
        # entry 0 reset at t=0, entry 1 at t=3, entry 2 continued from 0.
        np.testing.assert_array_equal(final[2].numpy()[:, 0], [6.0, 3.0, 6.0])
        np.testing.assert_array_equal(final[2].numpy(), ref_t)


def test_step_equals_unroll(rng):
    T, B, F = 5, 2, 3
    core = LSTMCore(4, use_time_step=True)
    x = rng.normal(size=(T, B, F)).astype(np.float32)
    first = np.zeros((T, B), bool)
    first[2, 1] = True
    state = core.initial_state(B)
    ys = []
    s = state
    for t in range(T):
        y, s = core.step(tf.constant(x[t]), tf.constant(first[t]), s)
        ys.append(y.numpy())
    yu, su = core.unroll(tf.constant(x), tf.constant(first), state)
    np.testing.assert_allclose(yu.numpy(), np.stack(ys), atol=1e-6)
    for a, b in zip(su, s):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)


def test_reset_zeroes_only_that_entry(rng):
    state = tuple(tf.constant(rng.normal(size=(3, n)).astype(np.float32)) for n in (4, 4, 1))
    out = reset_where_first(state, tf.constant([False, True, False]))
    for before, after in zip(state, out):
        np.testing.assert_array_equal(after.numpy()[1], 0.0)
        np.testing.assert_array_equal(after.numpy()[[0, 2]], before.numpy()[[0, 2]])
    # A reset step from a random state equals a step from the zero state for that entry.
    core = LSTMCore(4, use_time_step=True)
    x = tf.constant(rng.normal(size=(3, 2)).astype(np.float32))
    first = tf.constant([False, True, False])
    y_reset, _ = core.step(x, first, state)
    y_zero, _ = core.step(x, tf.constant([True] * 3), core.initial_state(3))
    y_cont, _ = core.step(x, tf.constant([False] * 3), state)
    np.testing.assert_allclose(y_reset.numpy()[1], y_zero.numpy()[1], atol=1e-6)
    np.testing.assert_allclose(y_reset.numpy()[[0, 2]], y_cont.numpy()[[0, 2]], atol=1e-6)
    assert not np.allclose(y_cont.numpy()[1], y_zero.numpy()[1])


def test_unroll_gradients_equal_stepping_gradients(rng):
    T, B, F = 4, 2, 3
    core = LSTMCore(5, use_time_step=True, time_step_scale=0.5)
    x = tf.constant(rng.normal(size=(T, B, F)).astype(np.float32))
    first = tf.constant([[True, True], [False, False], [False, True], [False, False]])
    core.step(x[0], first[0], core.initial_state(B))  # build
    w = tf.constant(rng.normal(size=(T, B, 5)).astype(np.float32))

    with tf.GradientTape() as tape:
        ys, _ = core.unroll(x, first, core.initial_state(B))
        loss = tf.reduce_sum(ys * w)
    g_unroll = tape.gradient(loss, core.trainable_variables)
    with tf.GradientTape() as tape:
        s, loss = core.initial_state(B), 0.0
        for t in range(T):
            y, s = core.step(x[t], first[t], s)
            loss += tf.reduce_sum(y * w[t])
    g_step = tape.gradient(loss, core.trainable_variables)
    assert len(g_unroll) == 3 and all(g is not None for g in g_unroll)
    for a, b in zip(g_unroll, g_step):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
