"""The tanh-squashed Gaussian's log-probability stays finite at the action bounds.

float32 ``tanh`` returns exactly +-1 for ``|x| > ~9``, so a sampled (or stored) action can sit
exactly at ``low`` or ``high``, where ``atanh`` is infinite; ``make_distribution`` clips the
squashed value into ``[-1 + eps, 1 - eps]`` before ``atanh``, and an action within eps of a
bound gets the log-mass of the Normal's tail beyond ``atanh(1 - eps)`` (issue #35 item 6).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.networks.distributions import TANH_EPS, greedy_action, make_distribution

LOW = np.array([-2.0, 0.0], np.float32)
HIGH = np.array([2.0, 4.0], np.float32)


def _numpy_log_prob(a, loc, scale, low, high):
    """The SAC paper's density in float64: Normal log-density of ``atanh(u)`` minus
    ``sum log(1 - u^2)`` minus ``sum log(half_range)``, ``u = (a - mid) / half_range``."""
    a, loc, scale = (np.asarray(v, np.float64) for v in (a, loc, scale))
    low, high = np.asarray(low, np.float64), np.asarray(high, np.float64)
    mid, half = (high + low) / 2, (high - low) / 2
    u = (a - mid) / half
    x = np.arctanh(u)
    log_normal = -0.5 * ((x - loc) / scale) ** 2 - np.log(scale) - 0.5 * np.log(2 * np.pi)
    return np.sum(log_normal - np.log(1 - u**2) - np.log(half), axis=-1)


def _log_prob_and_grads(loc, scale, actions):
    loc, scale = tf.Variable(loc), tf.Variable(scale)
    with tf.GradientTape() as tape:
        lp = make_distribution("tanh_gaussian", {"loc": loc, "scale": scale}, LOW, HIGH).log_prob(
            actions
        )
        total = tf.reduce_sum(lp)
    g_loc, g_scale = tape.gradient(total, [loc, scale])
    return lp.numpy(), g_loc.numpy(), g_scale.numpy()


@pytest.mark.parametrize("where", ["low", "high", "mixed"])
def test_log_prob_finite_exactly_at_bounds(where):
    actions = {
        "low": np.tile(LOW, (3, 1)),
        "high": np.tile(HIGH, (3, 1)),
        "mixed": np.array([[-2.0, 4.0], [2.0, 0.0], [0.5, 4.0]], np.float32),
    }[where]
    loc = np.array([[0.0, 0.0], [3.0, -3.0], [-1.0, 1.0]], np.float32)
    scale = np.full((3, 2), 0.7, np.float32)
    lp, g_loc, g_scale = _log_prob_and_grads(loc, scale, tf.constant(actions))
    assert np.all(np.isfinite(lp)), lp
    assert np.all(np.isfinite(g_loc)) and np.all(np.isfinite(g_scale)), (g_loc, g_scale)


def _numpy_tail_log_mass(loc, scale, upper):
    """float64 log P(X >= x_c) (upper) or log P(X <= -x_c), X ~ Normal(loc, scale)."""
    x_c = np.arctanh(np.float64(np.float32(1.0 - TANH_EPS)))
    z = (x_c - loc) / scale if upper else (x_c + loc) / scale
    return np.log(0.5 * np.array([math.erfc(v / math.sqrt(2.0)) for v in z.ravel()]))


@pytest.mark.parametrize("loc_value", [20.0, -20.0, 50.0, 7.0, -8.0])
def test_log_prob_finite_for_saturated_samples(loc_value):
    # A mean far outside tanh's float32 range: every sample squashes to exactly a bound.
    loc = np.full((64, 2), loc_value, np.float32)
    scale = np.full((64, 2), 0.5, np.float32)
    dist = make_distribution("tanh_gaussian", {"loc": loc, "scale": scale}, LOW, HIGH)
    # tf.identity: a new tensor, so the bijector cache cannot hand back the pre-squash draw
    # (the learner's entropy estimate -log pi(a') uses tf.stop_gradient(sample) the same way).
    bound = HIGH if loc_value > 0 else LOW
    if abs(loc_value) > 10:
        sample = tf.identity(dist.sample(seed=5))
        np.testing.assert_array_equal(sample.numpy(), np.tile(bound, (64, 1)))
    else:
        sample = tf.constant(np.tile(bound, (64, 1)))
    lp, g_loc, g_scale = _log_prob_and_grads(loc, scale, sample)
    assert np.all(np.isfinite(lp)), lp
    assert np.all(np.isfinite(g_loc)) and np.all(np.isfinite(g_scale))
    # Censored: the log-mass of the tail beyond atanh(1 - eps), summed over the dimensions;
    # the gradient pushes the mean further out (more mass at the bound), and vanishes when
    # all the mass is already there instead of growing with the mean (a clipped atanh
    # scores the draw as atanh(1 - eps) = 7.25, a gradient (7.25 - loc) / scale^2).
    want = 2 * _numpy_tail_log_mass(np.float64(loc_value), 0.5, loc_value > 0)
    np.testing.assert_allclose(lp, np.full(64, want[0]), rtol=1e-4, atol=1e-6)
    assert np.all(lp <= 0.0)
    assert np.all(np.sign(loc_value) * g_loc >= 0.0) and np.all(np.abs(g_loc) < 1.0 / 0.5 * 2)


def test_interior_log_prob_matches_numpy():
    rng = np.random.default_rng(0)
    loc = rng.normal(0.0, 1.5, size=(200, 2)).astype(np.float32)
    scale = rng.uniform(0.3, 1.5, size=(200, 2)).astype(np.float32)
    # Interior actions up to 1e-4 (in u) from the bounds, where float32 atanh is still
    # accurate enough for the 1e-5 comparison below.
    u = rng.uniform(-1.0 + 1e-4, 1.0 - 1e-4, size=(200, 2))
    u[:4] = [[1 - 1e-4, -1 + 1e-4], [0.0, 0.0], [0.9999, 0.5], [-0.999, 0.999]]
    mid, half = (HIGH + LOW) / 2, (HIGH - LOW) / 2
    a = (mid + half * u).astype(np.float32)
    lp, g_loc, g_scale = _log_prob_and_grads(loc, scale, tf.constant(a))
    want = _numpy_log_prob(a, loc, scale, LOW, HIGH)
    # float32 atanh near +-1 amplifies the rounding of a: compare relative to the value too.
    np.testing.assert_allclose(lp, want, rtol=1e-5, atol=1e-5)
    assert np.all(np.isfinite(g_loc)) and np.all(np.isfinite(g_scale))


def test_sampling_greedy_and_forward_unchanged():
    loc = np.array([[0.3, -0.4], [25.0, -25.0]], np.float32)
    scale = np.array([[0.5, 1.0], [0.5, 1.0]], np.float32)
    policy = {"loc": tf.constant(loc), "scale": tf.constant(scale)}
    dist = make_distribution("tanh_gaussian", policy, LOW, HIGH)
    mid, half = (HIGH + LOW) / 2, (HIGH - LOW) / 2
    # Sampling is the forward map of the Normal's draw with the same seed.
    tf.random.set_seed(1)
    a = dist.sample(seed=11).numpy()
    tf.random.set_seed(1)
    x = dist.distribution.sample(seed=11).numpy()
    np.testing.assert_allclose(a, mid + half * np.tanh(x), atol=1e-6)
    np.testing.assert_array_equal(a[1], [2.0, 0.0])  # saturated draws hit the bounds exactly
    np.testing.assert_allclose(
        greedy_action("tanh_gaussian", policy, LOW, HIGH).numpy(),
        mid + half * np.tanh(loc),
        atol=1e-6,
    )
    # Forward log-det-Jacobian unchanged (finite and exact for a pre-image far past 9).
    xs = tf.constant([[0.5, -30.0]], tf.float32)
    fldj = dist.bijector.forward_log_det_jacobian(xs, event_ndims=1).numpy()
    want = np.sum(
        np.log(half)
        + 2 * (np.log(2) - np.abs([0.5, -30.0]) - np.log1p(np.exp(-2 * np.abs([0.5, -30.0]))))
    )
    np.testing.assert_allclose(fldj, [want], rtol=1e-6)
