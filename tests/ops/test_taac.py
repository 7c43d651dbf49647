"""Tests for tfagents_vtrace.ops.taac: TAAC's compare-through return against slow numpy."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.ops import returns as rops
from tfagents_vtrace.ops import taac

SHAPES = [(2, 1), (2, 5), (5, 1), (5, 5), (37, 1), (37, 5)]
MODE_SHAPES = [(m, s) for m in RUN_MODES for s in SHAPES if m != "xla" or s in ((2, 5), (37, 5))]
HSETTINGS = settings(max_examples=20, deadline=None)


def _inputs(rng, t, b):
    rewards = rng.normal(size=(t, b)).astype(np.float32)
    discounts = np.full((t, b), 0.9, np.float32)
    discounts[t // 2] = 0.0  # a termination in the middle of the trace
    values = rng.normal(size=(t, b)).astype(np.float32)
    is_lasts = rng.uniform(size=(t, b)) < 0.3
    return rewards, discounts, values, is_lasts


def np_compare_through_stepwise(rewards, discounts, values, is_lasts):
    """The reference's backward loop: ret_t from step t+1; acc_t cut to V_t where is_last."""
    t_len, b_len = rewards.shape
    rets = np.zeros((t_len, b_len))
    acc = np.zeros((t_len, b_len))
    rets[-1] = acc[-1] = values[-1]
    for t in reversed(range(t_len - 1)):
        rets[t] = acc[t + 1] * discounts[t + 1] + rewards[t + 1]
        acc[t] = np.where(is_lasts[t], values[t], rets[t])
    return rets[:-1]


def np_compare_through_forward(rewards, discounts, values, is_lasts):
    """Forward definition: sum rewards from t+1 to the first cut n > t, bootstrap V_n."""
    t_len, b_len = rewards.shape
    out = np.zeros((t_len - 1, b_len))
    for b in range(b_len):
        for t in range(t_len - 1):
            ret, disc = 0.0, 1.0
            for n in range(t + 1, t_len):
                ret += disc * rewards[n, b]
                disc *= discounts[n, b]
                if is_lasts[n, b] or n == t_len - 1:
                    ret += disc * values[n, b]
                    break
            out[t, b] = ret
    return out


@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_compare_through_matches_reference_loop(mode, shape, rng):
    r, d, v, lasts = _inputs(rng, *shape)
    out = run_in_mode(taac.compare_through_returns, mode)(r, d, v, lasts)
    assert isinstance(out, taac.CompareThroughReturns)
    assert out.returns.shape == (shape[0] - 1, shape[1])
    want = np_compare_through_stepwise(r, d, v, lasts)
    np.testing.assert_allclose(out.returns.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        out.returns.numpy(), np_compare_through_forward(r, d, v, lasts), rtol=1e-5, atol=1e-5
    )
    mask = lasts.astype(np.float32)
    mask[-1] = 1.0
    np.testing.assert_array_equal(out.bootstrap_mask.numpy(), mask)


@pytest.mark.parametrize("mode", RUN_MODES)
def test_targets_cut_at_either_policy_switch(mode, rng):
    r, d, v, _ = _inputs(rng, 9, 4)
    step_is_last = rng.uniform(size=(9, 4)) < 0.1
    rollout_b = (rng.uniform(size=(9, 4)) < 0.3).astype(np.int64)
    train_b = rng.uniform(size=(9, 4)) < 0.3
    out = run_in_mode(taac.compare_through_targets, mode)(r, d, v, step_is_last, rollout_b, train_b)
    cuts = step_is_last | (rollout_b.astype(bool) | train_b)
    cuts[0] = step_is_last[0]  # b at step 0 is ignored
    want = np_compare_through_stepwise(r, d, v, cuts)
    np.testing.assert_allclose(out.returns.numpy(), want, rtol=1e-5, atol=1e-5)


def test_first_step_inputs_are_never_read(rng):
    r, d, v, lasts = _inputs(rng, 6, 3)
    base = taac.compare_through_returns(r, d, v, lasts).returns.numpy()
    r2, d2, v2, lasts2 = r.copy(), d.copy(), v.copy(), lasts.copy()
    r2[0], d2[0], v2[0], lasts2[0] = 99.0, 0.0, -99.0, ~lasts[0]
    other = taac.compare_through_returns(r2, d2, v2, lasts2).returns.numpy()
    np.testing.assert_array_equal(base, other)
    ones = np.ones_like(r, dtype=bool)
    b0 = taac.compare_through_targets(r, d, v, lasts, ones, ones).returns.numpy()
    b0_off = ones.copy()
    b0_off[0] = False
    b1 = taac.compare_through_targets(r, d, v, lasts, b0_off, b0_off).returns.numpy()
    np.testing.assert_array_equal(b0, b1)


def test_no_cuts_equals_shifted_discounted_return(rng):
    r, d, v, _ = _inputs(rng, 8, 3)
    out = taac.compare_through_returns(r, d, v, np.zeros_like(r, dtype=bool)).returns
    want = rops.discounted_returns(r[1:], d[1:], v[-1])
    np.testing.assert_allclose(out.numpy(), want.numpy(), rtol=1e-6, atol=1e-6)


def test_all_cuts_equals_one_step_td(rng):
    r, d, v, _ = _inputs(rng, 8, 3)
    out = taac.compare_through_returns(r, d, v, np.ones_like(r, dtype=bool)).returns
    np.testing.assert_allclose(out.numpy(), r[1:] + d[1:] * v[1:], rtol=1e-6, atol=1e-6)


def test_two_episodes_equal_episodes_computed_apart(rng):
    r, d, v, lasts = _inputs(rng, 10, 3)
    d[:] = 0.9
    d[5] = 0.0  # arriving at step 5 terminates episode 1 (steps 0..5)
    lasts[5] = True  # step 5 is LAST; step 6 starts episode 2
    full = taac.compare_through_returns(r, d, v, lasts).returns.numpy()
    ep1 = taac.compare_through_returns(r[:6], d[:6], v[:6], lasts[:6]).returns.numpy()
    ep2 = taac.compare_through_returns(r[6:], d[6:], v[6:], lasts[6:]).returns.numpy()
    np.testing.assert_allclose(full[:5], ep1, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(full[6:], ep2, rtol=1e-6, atol=1e-6)


def test_no_input_receives_gradient(rng):
    r, d, v, lasts = _inputs(rng, 5, 2)
    tensors = [tf.constant(x) for x in (r, d, v)]
    with tf.GradientTape() as tape:
        tape.watch(tensors)
        out = taac.compare_through_returns(*tensors, lasts)
        total = tf.reduce_sum(out.returns**2)
    assert tape.gradient(total, tensors) == [None, None, None]


@HSETTINGS
@given(st.integers(2, 8), st.integers(1, 3), st.data())
def test_gamma_zero_gives_next_rewards(t, b, data):
    floats = st.floats(-10, 10, width=32, allow_subnormal=False)
    r = data.draw(hnp.arrays(np.float32, (t, b), elements=floats))
    v = data.draw(hnp.arrays(np.float32, (t, b), elements=floats))
    lasts = data.draw(hnp.arrays(np.bool_, (t, b)))
    out = taac.compare_through_returns(r, np.zeros_like(r), v, lasts).returns
    np.testing.assert_array_equal(out.numpy(), r[1:])
    np.testing.assert_allclose(
        out.numpy(), np_compare_through_stepwise(r, np.zeros_like(r), v, lasts), atol=1e-6
    )


@pytest.mark.parametrize(
    "index,bad,pattern",
    [
        (0, np.zeros((5, 3), np.int32), r"`rewards`.*floating.*int32"),
        (1, np.zeros((4, 3), np.float32), r"`discounts`.*\[5, 3\].*\[4, 3\]"),
        (2, np.zeros((5, 2), np.float32), r"`target_values`.*\[5, 3\].*\[5, 2\]"),
        (3, np.zeros((5, 3, 1), bool), r"`is_lasts`.*rank 2.*\[5, 3, 1\]"),
        (3, np.zeros((5, 4), bool), r"`is_lasts`.*\[5, 3\].*\[5, 4\]"),
    ],
)
def test_bad_input(index, bad, pattern):
    args = [np.zeros((5, 3), np.float32)] * 3 + [np.zeros((5, 3), bool)]
    args[index] = bad
    with pytest.raises(ValueError, match=pattern):
        taac.compare_through_returns(*args)


def test_single_step_is_rejected():
    x = np.zeros((1, 3), np.float32)
    with pytest.raises(ValueError, match=r"`rewards`.*at least 2.*\[1, 3\]"):
        taac.compare_through_returns(x, x, x, np.zeros((1, 3), bool))


def test_targets_bad_input():
    x = np.zeros((5, 3), np.float32)
    flags = np.zeros((5, 3), bool)
    with pytest.raises(ValueError, match=r"`train_b`.*\[5, 3\].*\[4, 3\]"):
        taac.compare_through_targets(x, x, x, flags, flags, flags[:4])
    with pytest.raises(ValueError, match=r"`rollout_b`.*rank 2"):
        taac.compare_through_targets(x, x, x, flags, flags[0], flags)


@pytest.mark.parametrize("jit", [False, True])
def test_unknown_static_shapes(jit, rng):
    spec = tf.TensorSpec([None, None])
    flags = tf.TensorSpec([None, None], tf.bool)

    @tf.function(input_signature=[spec] * 3 + [flags], jit_compile=jit)
    def fn(*args):
        return taac.compare_through_returns(*args).returns

    r, d, v, lasts = _inputs(rng, 7, 3)
    want = np_compare_through_stepwise(r, d, v, lasts)
    np.testing.assert_allclose(fn(r, d, v, lasts).numpy(), want, rtol=1e-5, atol=1e-5)
