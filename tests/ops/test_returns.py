"""Tests for tfagents_vtrace.ops.returns against slow numpy written in the papers' notation."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.ops import returns as rops

SHAPES = [(1, 1), (1, 5), (5, 1), (5, 5), (37, 1), (37, 5)]
# XLA compiles per shape: keep its grid small.
MODE_SHAPES = [(m, s) for m in RUN_MODES for s in SHAPES if m != "xla" or s in ((1, 5), (37, 5))]
LAMBDAS = [1.0, 0.9]
HSETTINGS = settings(max_examples=20, deadline=None)


def _inputs(rng, t, b, zero_discount=True):
    rewards = rng.normal(size=(t, b)).astype(np.float32)
    values = rng.normal(size=(t, b)).astype(np.float32)
    bootstrap = rng.normal(size=(b,)).astype(np.float32)
    discounts = np.full((t, b), 0.9, np.float32)
    if zero_discount and t > 1:
        discounts[t // 2] = 0.0  # an episode ends in the middle of the trace
    return rewards, discounts, values, bootstrap


# ---- slow numpy references (explicit loops over time, papers' notation) --------------------


def np_discounted(r, d, boot):
    t_len, b_len = r.shape
    g = np.zeros_like(r, dtype=np.float64)
    for b in range(b_len):
        acc = float(boot[b])
        for t in reversed(range(t_len)):
            acc = r[t, b] + d[t, b] * acc
            g[t, b] = acc
    return g


def np_lambda_recursive(r, d, v, boot, lam):
    """G_t = r_t + gamma_t ((1 - lambda_t) V(x_{t+1}) + lambda_t G_{t+1}), G_T = V(x_T)."""
    t_len, b_len = r.shape
    lam = np.broadcast_to(lam, r.shape)
    g = np.zeros_like(r, dtype=np.float64)
    for b in range(b_len):
        nxt = float(boot[b])  # G_{t+1}
        for t in reversed(range(t_len)):
            v_next = boot[b] if t == t_len - 1 else v[t + 1, b]
            nxt = r[t, b] + d[t, b] * ((1 - lam[t, b]) * v_next + lam[t, b] * nxt)
            g[t, b] = nxt
    return g


def np_lambda_nstep(r, d, v, boot, lam):
    """G^lambda_t = (1-lambda) sum_{n=1}^{N-1} lambda^{n-1} G^(n)_t + lambda^{N-1} G^(N)_t."""
    t_len, b_len = r.shape
    vv = np.concatenate([v, boot[None]], axis=0)  # V(x_0) .. V(x_T)
    out = np.zeros_like(r, dtype=np.float64)
    for b in range(b_len):
        for t in range(t_len):
            horizon = t_len - t

            def n_step(n, b=b, t=t):
                ret, disc = 0.0, 1.0
                for k in range(n):
                    ret += disc * r[t + k, b]
                    disc *= d[t + k, b]
                return ret + disc * vv[t + n, b]

            total = sum((1 - lam) * lam ** (n - 1) * n_step(n) for n in range(1, horizon))
            out[t, b] = total + lam ** (horizon - 1) * n_step(horizon)
    return out


def np_gae_eq16(r, v, boot, d, lam):
    """A_t = sum_l (prod_{i<l} gamma_{t+i} lambda) delta_{t+l} (arXiv 1506.02438, eq. 16)."""
    t_len, b_len = r.shape
    vv = np.concatenate([v, boot[None]], axis=0)
    delta = r + d * vv[1:] - vv[:-1]
    adv = np.zeros_like(r, dtype=np.float64)
    for b in range(b_len):
        for t in range(t_len):
            weight = 1.0
            for step in range(t_len - t):
                adv[t, b] += weight * delta[t + step, b]
                weight *= d[t + step, b] * lam
    return adv


# ---- numerics in every run mode --------------------------------------------------------------


@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_discounted_returns_matches_numpy(mode, shape, rng):
    r, d, _, boot = _inputs(rng, *shape)
    out = run_in_mode(rops.discounted_returns, mode)(r, d, boot)
    assert out.shape == shape
    np.testing.assert_allclose(out.numpy(), np_discounted(r, d, boot), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_lambda_returns_matches_both_definitions(mode, shape, lam, rng):
    r, d, v, boot = _inputs(rng, *shape)
    out = run_in_mode(rops.lambda_returns, mode)(r, d, v, boot, lam)
    np.testing.assert_allclose(
        out.numpy(), np_lambda_recursive(r, d, v, boot, lam), rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        out.numpy(), np_lambda_nstep(r, d, v, boot, lam), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("lam", LAMBDAS)
@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_gae_matches_eq16(mode, shape, lam, rng):
    r, d, v, boot = _inputs(rng, *shape)
    out = run_in_mode(rops.generalized_advantage_estimation, mode)(r, v, boot, d, lam)
    assert isinstance(out, rops.GAEReturns)
    adv = np_gae_eq16(r, v, boot, d, lam)
    np.testing.assert_allclose(out.advantages.numpy(), adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.returns.numpy(), adv + v, rtol=1e-5, atol=1e-5)
    # GAE returns are the TD(lambda) returns.
    np.testing.assert_allclose(
        out.returns.numpy(), np_lambda_recursive(r, d, v, boot, lam), rtol=1e-5, atol=1e-5
    )


@pytest.mark.parametrize("mode", RUN_MODES)
def test_per_step_lambda_tensor(mode, rng):
    r, d, v, boot = _inputs(rng, 7, 3)
    lam = rng.uniform(size=(7, 3)).astype(np.float32)
    lr = run_in_mode(rops.lambda_returns, mode)(r, d, v, boot, lam)
    gae = run_in_mode(rops.generalized_advantage_estimation, mode)(r, v, boot, d, lam)
    want = np_lambda_recursive(r, d, v, boot, lam)
    np.testing.assert_allclose(lr.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gae.returns.numpy(), want, rtol=1e-5, atol=1e-5)


def test_float64_tensors_keep_dtype(rng):
    r, d, v, boot = _inputs(rng, 4, 2)
    r64 = tf.constant(r, tf.float64)  # the other inputs follow the dtype of `rewards`
    out = rops.generalized_advantage_estimation(r64, v, boot, d, 0.5)
    assert out.advantages.dtype == tf.float64
    np.testing.assert_allclose(out.advantages.numpy(), np_gae_eq16(r, v, boot, d, 0.5), 1e-6)


# ---- gradient contract and episode boundaries ---------------------------------------------


def test_no_input_receives_gradient(rng):
    r, d, v, boot = (tf.constant(x) for x in _inputs(rng, 5, 3))
    lam = tf.constant(0.9)
    with tf.GradientTape(persistent=True) as tape:
        tape.watch([r, d, v, boot, lam])
        outs = [
            rops.discounted_returns(r, d, boot),
            rops.lambda_returns(r, d, v, boot, lam),
            *rops.generalized_advantage_estimation(r, v, boot, d, lam),
        ]
        total = tf.add_n([tf.reduce_sum(o * o) for o in outs])
    assert all(g is None for g in tape.gradient(total, [r, d, v, boot, lam]))


@pytest.mark.parametrize("lam", LAMBDAS)
def test_two_episodes_equal_episodes_computed_apart(lam, rng):
    r, d, v, boot = _inputs(rng, 9, 4, zero_discount=False)
    d[3] = 0.0  # episode 1 = steps 0..3, episode 2 = steps 4..8
    first = slice(0, 4)
    second = slice(4, 9)
    unused_boot = rng.normal(size=(4,)).astype(np.float32) * 100.0  # discount 0: never read
    full = rops.generalized_advantage_estimation(r, v, boot, d, lam)
    ep1 = rops.generalized_advantage_estimation(r[first], v[first], unused_boot, d[first], lam)
    ep2 = rops.generalized_advantage_estimation(r[second], v[second], boot, d[second], lam)
    for field in ("advantages", "returns"):
        joined = np.concatenate([getattr(ep1, field), getattr(ep2, field)])
        np.testing.assert_allclose(getattr(full, field).numpy(), joined, rtol=1e-6, atol=1e-6)
    full_lr = rops.lambda_returns(r, d, v, boot, lam)
    apart = np.concatenate(
        [
            rops.lambda_returns(r[first], d[first], v[first], unused_boot, lam),
            rops.lambda_returns(r[second], d[second], v[second], boot, lam),
        ]
    )
    np.testing.assert_allclose(full_lr.numpy(), apart, rtol=1e-6, atol=1e-6)
    full_dr = rops.discounted_returns(r, d, boot)
    apart_dr = np.concatenate(
        [
            rops.discounted_returns(r[first], d[first], unused_boot),
            rops.discounted_returns(r[second], d[second], boot),
        ]
    )
    np.testing.assert_allclose(full_dr.numpy(), apart_dr, rtol=1e-6, atol=1e-6)


# ---- property tests at the edges -----------------------------------------------------------

_floats = st.floats(-10, 10, width=32, allow_subnormal=False)  # TF flushes denormals


@st.composite
def _traces(draw):
    t = draw(st.integers(1, 8))
    b = draw(st.integers(1, 3))
    r = draw(hnp.arrays(np.float32, (t, b), elements=_floats))
    v = draw(hnp.arrays(np.float32, (t, b), elements=_floats))
    boot = draw(hnp.arrays(np.float32, (b,), elements=_floats))
    d = draw(hnp.arrays(np.float32, (t, b), elements=st.sampled_from([0.0, 0.5, 0.99, 1.0])))
    return r, d, v, boot


@HSETTINGS
@given(_traces())
def test_lambda_zero_is_one_step_td(trace):
    r, d, v, boot = trace
    one_step = r + d * np.concatenate([v[1:], boot[None]])
    lr = rops.lambda_returns(r, d, v, boot, 0.0)
    gae = rops.generalized_advantage_estimation(r, v, boot, d, 0.0)
    np.testing.assert_allclose(lr.numpy(), one_step, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(gae.advantages.numpy(), one_step - v, rtol=1e-5, atol=1e-4)


@HSETTINGS
@given(_traces(), st.floats(0.0, 1.0))
def test_gamma_zero_gives_rewards(trace, lam):
    r, _, v, boot = trace
    zeros = np.zeros_like(r)
    np.testing.assert_array_equal(rops.discounted_returns(r, zeros, boot).numpy(), r)
    np.testing.assert_allclose(rops.lambda_returns(r, zeros, v, boot, lam).numpy(), r)
    gae = rops.generalized_advantage_estimation(r, v, boot, zeros, lam)
    np.testing.assert_allclose(gae.advantages.numpy(), r - v, rtol=1e-6, atol=1e-5)


@HSETTINGS
@given(_traces())
def test_lambda_one_is_discounted_return(trace):
    r, d, v, boot = trace
    np.testing.assert_allclose(
        rops.lambda_returns(r, d, v, boot, 1.0).numpy(),
        np_discounted(r, d, boot),
        rtol=1e-5,
        atol=1e-3,
    )


# ---- bad input --------------------------------------------------------------------------------


def _good():
    return dict(
        rewards=np.zeros((5, 3), np.float32),
        discounts=np.ones((5, 3), np.float32),
        values=np.zeros((5, 3), np.float32),
        bootstrap_value=np.zeros((3,), np.float32),
    )


@pytest.mark.parametrize(
    "name,bad,pattern",
    [
        ("rewards", np.zeros((5, 3, 1), np.float32), r"`rewards`.*rank 2.*\[5, 3, 1\]"),
        ("discounts", np.ones((4, 3), np.float32), r"`discounts`.*\[5, 3\].*\[4, 3\]"),
        ("values", np.zeros((5, 2), np.float32), r"`values`.*\[5, 3\].*\[5, 2\]"),
        ("bootstrap_value", np.zeros((4,), np.float32), r"`bootstrap_value`.*\[3\].*\[4\]"),
        ("bootstrap_value", np.zeros((1, 3), np.float32), r"`bootstrap_value`.*rank 1.*\[1, 3\]"),
        ("rewards", np.zeros((5, 3), np.int32), r"`rewards`.*floating.*int32"),
    ],
)
def test_bad_input_names_argument_and_shapes(name, bad, pattern):
    kw = _good()
    kw[name] = bad
    with pytest.raises(ValueError, match=pattern):
        rops.generalized_advantage_estimation(
            kw["rewards"], kw["values"], kw["bootstrap_value"], kw["discounts"], 0.9
        )
    if name != "values":
        with pytest.raises(ValueError, match=pattern):
            rops.discounted_returns(kw["rewards"], kw["discounts"], kw["bootstrap_value"])
    with pytest.raises(ValueError, match=pattern):
        rops.lambda_returns(
            kw["rewards"], kw["discounts"], kw["values"], kw["bootstrap_value"], 0.9
        )


def test_bad_lambda_shape():
    kw = _good()
    with pytest.raises(ValueError, match=r"`lambda_`.*\[5, 3\].*\[5, 2\]"):
        rops.lambda_returns(
            kw["rewards"], kw["discounts"], kw["values"], kw["bootstrap_value"], np.ones((5, 2))
        )


@pytest.mark.parametrize("jit", [False, True])
def test_unknown_static_shapes(jit, rng):
    spec2, spec1 = tf.TensorSpec([None, None]), tf.TensorSpec([None])

    @tf.function(input_signature=[spec2, spec2, spec1, spec2], jit_compile=jit)
    def fn(r, v, boot, d):
        gae = rops.generalized_advantage_estimation(r, v, boot, d, 0.9)
        return gae.advantages, rops.lambda_returns(r, d, v, boot, 0.9)

    r, d, v, boot = _inputs(rng, 6, 2)
    adv, lr = fn(r, v, boot, d)
    np.testing.assert_allclose(adv.numpy(), np_gae_eq16(r, v, boot, d, 0.9), atol=1e-5)
    np.testing.assert_allclose(lr.numpy(), np_lambda_recursive(r, d, v, boot, 0.9), atol=1e-5)
