"""Tests for tfagents_vtrace.ops.retrace (ACER) against slow numpy in the paper's notation."""

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.ops import retrace
from tfagents_vtrace.ops import returns as rops

SHAPES = [(1, 1), (1, 5), (5, 1), (5, 5), (37, 1), (37, 5)]
MODE_SHAPES = [(m, s) for m in RUN_MODES for s in SHAPES if m != "xla" or s in ((1, 5), (37, 5))]
HSETTINGS = settings(max_examples=20, deadline=None)
NUM_ACTIONS = 4


def _trace(rng, t, b, zero_discount=True):
    rewards = rng.normal(size=(t, b)).astype(np.float32)
    discounts = np.full((t, b), 0.95, np.float32)
    if zero_discount and t > 1:
        discounts[t // 2] = 0.0
    q = rng.normal(size=(t, b)).astype(np.float32)
    v = rng.normal(size=(t, b)).astype(np.float32)
    boot = rng.normal(size=(b,)).astype(np.float32)
    log_rhos = rng.normal(scale=1.0, size=(t, b)).astype(np.float32)
    return rewards, discounts, q, v, boot, log_rhos


# ---- slow numpy references ------------------------------------------------------------------


def np_q_ret(r, d, q, v, boot, rho, action_dim=1, opc=False, traces=None):
    """ACER Algorithm 2, lines "Q_ret <- r_i + gamma Q_ret" and "Q_ret <- c_i (...) + V".

    The trace is ``c_i = min(1, rho_i^(1/d))`` (1 for Q_opc) unless ``traces`` gives it.
    """
    k, b_len = r.shape
    q_ret = np.zeros((k, b_len))
    for b in range(b_len):
        ret = float(boot[b])  # Q_ret = V(x_k) (the zero discount of a terminal step zeroes it)
        for i in reversed(range(k)):
            ret = r[i, b] + d[i, b] * ret
            q_ret[i, b] = ret
            if traces is not None:
                c = traces[i, b]
            else:
                c = 1.0 if opc else min(1.0, rho[i, b] ** (1.0 / action_dim))
            ret = c * (ret - q[i, b]) + v[i, b]
    return q_ret


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_discrete_g(pi_logits, mu_logits, actions, q_ret, q_all, v, c):
    """Per-step loss -(...) and the analytic gradient -g w.r.t. the logits (eq. 9 + 10)."""
    t_len, b_len, n = pi_logits.shape
    pi, mu = np_softmax(pi_logits.astype(np.float64)), np_softmax(mu_logits.astype(np.float64))
    loss = np.zeros((t_len, b_len))
    grad = np.zeros((t_len, b_len, n))
    for t in range(t_len):
        for b in range(b_len):
            a = actions[t, b]
            dlogp = lambda j, t=t, b=b: np.eye(n)[j] - pi[t, b]  # d log pi(j) / d logits
            rho = pi[t, b] / mu[t, b]
            w = rho[a] if c is None else min(c, rho[a])
            loss[t, b] -= w * np.log(pi[t, b, a]) * (q_ret[t, b] - v[t, b])
            grad[t, b] -= w * dlogp(a) * (q_ret[t, b] - v[t, b])
            if c is None:
                continue
            for j in range(n):
                corr = max(0.0, 1.0 - c / rho[j]) * pi[t, b, j]
                loss[t, b] -= corr * np.log(pi[t, b, j]) * (q_all[t, b, j] - v[t, b])
                grad[t, b] -= corr * dlogp(j) * (q_all[t, b, j] - v[t, b])
    return loss, grad


def np_projection(g, k, delta):
    g2, k2 = g.reshape(-1, g.shape[-1]), k.reshape(-1, k.shape[-1])
    z = np.zeros_like(g2, dtype=np.float64)
    for i in range(len(g2)):
        kk = float(k2[i] @ k2[i])
        scale = max(0.0, (float(k2[i] @ g2[i]) - delta) / kk) if kk > 0 else 0.0
        z[i] = g2[i] - scale * k2[i]
    return z.reshape(g.shape)


# ---- Q_ret / Q_opc -------------------------------------------------------------------------


@pytest.mark.parametrize("action_dim", [1, 3])
@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_retrace_matches_algorithm_2(mode, shape, action_dim, rng):
    r, d, q, v, boot, log_rhos = _trace(rng, *shape)
    out = run_in_mode(retrace.retrace_targets, mode)(r, d, q, v, boot, log_rhos, action_dim)
    assert isinstance(out, retrace.RetraceReturns)
    rho = np.exp(log_rhos.astype(np.float64))
    want = np_q_ret(r, d, q, v, boot, rho, action_dim)
    np.testing.assert_allclose(out.q_ret.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        out.trace_coefficients.numpy(), np.minimum(1.0, rho ** (1 / action_dim)), rtol=1e-6
    )
    v_target = np.minimum(1.0, rho) * (want - q) + v  # ACER's V target (continuous case)
    np.testing.assert_allclose(out.v_targets.numpy(), v_target, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,shape", MODE_SHAPES)
def test_qopc_matches_algorithm_2_without_traces(mode, shape, rng):
    r, d, q, v, boot, _ = _trace(rng, *shape)
    out = run_in_mode(retrace.qopc_targets, mode)(r, d, q, v, boot)
    want = np_q_ret(r, d, q, v, boot, None, opc=True)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_retrace_lambda_scales_traces(rng):
    r, d, q, v, boot, log_rhos = _trace(rng, 6, 2)
    out = retrace.retrace_targets(r, d, q, v, boot, log_rhos, lambda_=0.5)
    traces = 0.5 * np.minimum(1.0, np.exp(log_rhos.astype(np.float64)))
    want = np_q_ret(r, d, q, v, boot, None, traces=traces)
    np.testing.assert_allclose(out.q_ret.numpy(), want, rtol=1e-5, atol=1e-5)


def test_retrace_targets_receive_no_gradient(rng):
    tensors = [tf.constant(x) for x in _trace(rng, 5, 3)]
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(tensors)
        out = retrace.retrace_targets(*tensors)
        opc = retrace.qopc_targets(*tensors[:5])
        total = tf.reduce_sum(out.q_ret**2 + out.v_targets**2 + opc**2)
    assert all(g is None for g in tape.gradient(total, tensors))


def test_two_episodes_equal_episodes_computed_apart(rng):
    r, d, q, v, boot, log_rhos = _trace(rng, 9, 3, zero_discount=False)
    d[4] = 0.0
    a, b = slice(0, 5), slice(5, 9)
    junk = np.full((3,), 1e3, np.float32)
    full = retrace.retrace_targets(r, d, q, v, boot, log_rhos)
    ep1 = retrace.retrace_targets(r[a], d[a], q[a], v[a], junk, log_rhos[a])
    ep2 = retrace.retrace_targets(r[b], d[b], q[b], v[b], boot, log_rhos[b])
    np.testing.assert_allclose(full.q_ret, np.concatenate([ep1.q_ret, ep2.q_ret]), atol=1e-6)
    full_opc = retrace.qopc_targets(r, d, q, v, boot)
    apart = [
        retrace.qopc_targets(r[a], d[a], q[a], v[a], junk),
        retrace.qopc_targets(r[b], d[b], q[b], v[b], boot),
    ]
    np.testing.assert_allclose(full_opc, np.concatenate(apart), atol=1e-6)


_floats = st.floats(-5, 5, width=32, allow_subnormal=False)


@HSETTINGS
@given(st.integers(1, 8), st.integers(1, 3), st.data())
def test_rho_one_gives_on_policy_lambda_one_return(t, b, data):
    arr = lambda shape: data.draw(hnp.arrays(np.float32, shape, elements=_floats))
    r, q, v, boot = arr((t, b)), arr((t, b)), arr((t, b)), arr((b,))
    d = data.draw(hnp.arrays(np.float32, (t, b), elements=st.sampled_from([0.0, 0.9, 1.0])))
    zeros = np.zeros_like(r)
    # On-policy with Q(x_t, a_t) = V(x_t) (e.g. one action): Q_ret is the lambda = 1 return.
    q_ret = retrace.retrace_targets(r, d, v, v, boot, zeros).q_ret
    want = rops.lambda_returns(r, d, v, boot, 1.0)
    np.testing.assert_allclose(q_ret.numpy(), want.numpy(), rtol=1e-5, atol=1e-4)
    # In general rho = 1 makes every trace 1: Q_ret = Q_opc = the discounted return of the
    # corrected rewards r_t + gamma_t (V(x_{t+1}) - Q(x_{t+1}, a_{t+1})), Q(x_T, .) := V(x_T).
    q_ret = retrace.retrace_targets(r, d, q, v, boot, zeros).q_ret
    q_opc = retrace.qopc_targets(r, d, q, v, boot)
    corrected = r + d * (np.concatenate([v[1:], boot[None]]) - np.concatenate([q[1:], boot[None]]))
    want = rops.discounted_returns(corrected, d, boot)
    np.testing.assert_allclose(q_ret.numpy(), want.numpy(), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(q_opc.numpy(), want.numpy(), rtol=1e-5, atol=1e-4)
    # gamma = 0: both targets are the immediate rewards.
    log_rhos = data.draw(hnp.arrays(np.float32, (t, b), elements=_floats))
    np.testing.assert_array_equal(retrace.retrace_targets(r, zeros, q, v, boot, log_rhos)[0], r)
    np.testing.assert_array_equal(retrace.qopc_targets(r, zeros, q, v, boot).numpy(), r)


# ---- truncated importance sampling with bias correction ------------------------------------


def _policy_inputs(rng, t, b):
    pi_logits = rng.normal(size=(t, b, NUM_ACTIONS)).astype(np.float32)
    mu_logits = rng.normal(size=(t, b, NUM_ACTIONS)).astype(np.float32) * 2.0
    actions = rng.integers(0, NUM_ACTIONS, size=(t, b)).astype(np.int32)
    q_ret = rng.normal(size=(t, b)).astype(np.float32)
    q_all = rng.normal(size=(t, b, NUM_ACTIONS)).astype(np.float32)
    v = rng.normal(size=(t, b)).astype(np.float32)
    return pi_logits, mu_logits, actions, q_ret, q_all, v


@pytest.mark.parametrize("c", [10.0, 1.0, None])
@pytest.mark.parametrize("mode", RUN_MODES)
def test_discrete_loss_and_gradient_match_acer_g(mode, c, rng):
    pi_logits, mu_logits, actions, q_ret, q_all, v = _policy_inputs(rng, 5, 3)
    fn = lambda *args: retrace.truncated_is_with_bias_correction_discrete(*args, c)
    tensors = [tf.constant(x) for x in (pi_logits, mu_logits, actions, q_ret, q_all, v)]

    def loss_and_grads(*args):
        with tf.GradientTape() as tape:
            tape.watch([args[0], args[1], *args[3:]])
            out = fn(*args)
            total = tf.reduce_sum(out.loss)
        return out, tape.gradient(total, [args[0], args[1], *args[3:]])

    out, grads = run_in_mode(loss_and_grads, mode)(*tensors)
    want_loss, want_grad = np_discrete_g(pi_logits, mu_logits, actions, q_ret, q_all, v, c)
    np.testing.assert_allclose(out.loss.numpy(), want_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(
        out.truncated_loss.numpy() + out.bias_correction_loss.numpy(), want_loss, 1e-5, 1e-5
    )
    # -grad(loss) w.r.t. the target logits is ACER's g; nothing else receives a gradient.
    np.testing.assert_allclose(grads[0].numpy(), want_grad, rtol=1e-4, atol=1e-5)
    assert all(g is None for g in grads[1:])
    if c is None:
        np.testing.assert_array_equal(out.bias_correction_loss.numpy(), 0.0)


def test_discrete_correction_is_zero_when_threshold_dominates(rng):
    pi_logits, mu_logits, actions, q_ret, q_all, v = _policy_inputs(rng, 3, 2)
    mu_logits = pi_logits  # rho = 1 everywhere, so [1 - c/rho]_+ = 0 for c >= 1
    out = retrace.truncated_is_with_bias_correction_discrete(
        pi_logits, mu_logits, actions, q_ret, q_all, v, 1.0
    )
    np.testing.assert_allclose(out.rhos.numpy(), 1.0, rtol=1e-6)
    np.testing.assert_array_equal(out.bias_correction_loss.numpy(), 0.0)


def test_discrete_handles_zero_probability_actions():
    logits = np.array([[[0.0, -np.inf, 1.0]]], np.float32)
    out = retrace.truncated_is_with_bias_correction_discrete(
        logits, np.zeros((1, 1, 3), np.float32), [[0]], [[1.0]], np.ones((1, 1, 3)), [[0.0]], 0.5
    )
    assert np.all(np.isfinite(out.loss.numpy()))


@pytest.mark.parametrize("c", [2.0, None])
@pytest.mark.parametrize("mode", RUN_MODES)
def test_continuous_loss_and_gradient(mode, c, rng):
    shape = (4, 3)
    lp, lm, slp, slm = (rng.normal(size=shape).astype(np.float32) for _ in range(4))
    q_ret, sq, v = (rng.normal(size=shape).astype(np.float32) for _ in range(3))
    tensors = [tf.constant(x) for x in (lp, lm, slp, slm, q_ret, sq, v)]

    def loss_and_grads(*args):
        with tf.GradientTape() as tape:
            tape.watch(args)
            out = retrace.truncated_is_with_bias_correction_continuous(*args, c)
            total = tf.reduce_sum(out.loss)
        return out, tape.gradient(total, args)

    out, grads = run_in_mode(loss_and_grads, mode)(*tensors)
    want_loss = np.zeros(shape)
    want_g = np.zeros(shape)  # d loss / d log pi(a_t)
    want_gs = np.zeros(shape)  # d loss / d log pi(a'_t)
    for t in range(shape[0]):
        for b in range(shape[1]):
            rho, rho_s = np.exp(lp[t, b] - lm[t, b]), np.exp(slp[t, b] - slm[t, b])
            w = rho if c is None else min(c, rho)
            corr = 0.0 if c is None else max(0.0, 1.0 - c / rho_s)
            want_g[t, b] = -w * (q_ret[t, b] - v[t, b])
            want_gs[t, b] = -corr * (sq[t, b] - v[t, b])
            want_loss[t, b] = want_g[t, b] * lp[t, b] + want_gs[t, b] * slp[t, b]
    np.testing.assert_allclose(out.loss.numpy(), want_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(grads[0].numpy(), want_g, rtol=1e-4, atol=1e-5)
    if c is None:  # no correction term: log pi(a') is not used at all
        assert grads[2] is None
    else:
        np.testing.assert_allclose(grads[2].numpy(), want_gs, rtol=1e-4, atol=1e-5)
    assert grads[1] is None and all(g is None for g in grads[3:])


# ---- trust region ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", RUN_MODES)
def test_trust_region_matches_closed_form(mode, rng):
    g = rng.normal(size=(2, 3, 5)).astype(np.float32)
    k = rng.normal(size=(2, 3, 5)).astype(np.float32)
    k[0, 1] = 0.0  # ||k|| = 0: no projection, no NaN
    out = run_in_mode(retrace.trust_region_projection, mode)(g, k, tf.constant(0.1))
    np.testing.assert_allclose(out.z.numpy(), np_projection(g, k, 0.1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(out.z.numpy()[0, 1], g[0, 1])
    assert out.scale.shape == (2, 3)


@HSETTINGS
@given(st.integers(1, 6), st.floats(0.0, 3.0), st.data())
def test_trust_region_constraint_holds(dim, delta, data):
    arr = lambda: data.draw(hnp.arrays(np.float32, (3, dim), elements=_floats))
    g, k = arr(), arr()
    out = retrace.trust_region_projection(g, k, delta)
    z = out.z.numpy().astype(np.float64)
    kz = np.sum(k * z, -1)
    kg = np.sum(k * g, -1)
    assert np.all(kz <= delta + 1e-3 * (1 + np.abs(kg)))
    inactive = kg <= delta
    np.testing.assert_array_equal(z[inactive], g[inactive])
    np.testing.assert_allclose(z, np_projection(g, k, delta), rtol=1e-4, atol=1e-3)


def test_trust_region_output_is_stop_gradient(rng):
    g = tf.constant(rng.normal(size=(4, 3)).astype(np.float32))
    k = tf.constant(rng.normal(size=(4, 3)).astype(np.float32))
    with tf.GradientTape() as tape:
        tape.watch([g, k])
        total = tf.reduce_sum(retrace.trust_region_projection(g, k, 0.0).z)
    assert tape.gradient(total, [g, k]) == [None, None]


# ---- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "index,bad,pattern",
    [
        (0, np.zeros((5,), np.float32), r"`rewards`.*rank 2.*\[5\]"),
        (1, np.zeros((4, 3), np.float32), r"`discounts`.*\[5, 3\].*\[4, 3\]"),
        (2, np.zeros((5, 2), np.float32), r"`q_values`.*\[5, 3\].*\[5, 2\]"),
        (3, np.zeros((5, 3, 2), np.float32), r"`values`.*rank 2.*\[5, 3, 2\]"),
        (4, np.zeros((2,), np.float32), r"`bootstrap_value`.*\[3\].*\[2\]"),
        (5, np.zeros((6, 3), np.float32), r"`log_rhos`.*\[5, 3\].*\[6, 3\]"),
        (0, np.zeros((5, 3), np.int64), r"`rewards`.*floating.*int64"),
    ],
)
def test_retrace_bad_input(index, bad, pattern):
    args = [np.zeros((5, 3), np.float32)] * 4 + [np.zeros((3,), np.float32)]
    args += [np.zeros((5, 3), np.float32)]
    args[index] = bad
    with pytest.raises(ValueError, match=pattern):
        retrace.retrace_targets(*args)
    if index < 5:
        with pytest.raises(ValueError, match=pattern):
            retrace.qopc_targets(*args[:5])


def test_policy_loss_bad_input(rng):
    pi_logits, mu_logits, actions, q_ret, q_all, v = _policy_inputs(rng, 5, 3)
    f = retrace.truncated_is_with_bias_correction_discrete
    with pytest.raises(ValueError, match=r"`behaviour_policy_logits`.*\[5, 3, 4\].*\[5, 3, 3\]"):
        f(pi_logits, mu_logits[..., :3], actions, q_ret, q_all, v)
    with pytest.raises(ValueError, match=r"`actions`.*\[5, 3\].*\[5, 2\]"):
        f(pi_logits, mu_logits, actions[:, :2], q_ret, q_all, v)
    with pytest.raises(ValueError, match=r"`actions`.*integer"):
        f(pi_logits, mu_logits, actions.astype(np.float32), q_ret, q_all, v)
    with pytest.raises(ValueError, match=r"`q_ret`.*\[5, 3\].*\[4, 3\]"):
        f(pi_logits, mu_logits, actions, q_ret[:4], q_all, v)
    with pytest.raises(ValueError, match=r"`values`.*\[5, 3\].*\[5, 1\]"):
        f(pi_logits, mu_logits, actions, q_ret, q_all, v[:, :1])
    with pytest.raises(ValueError, match=r"`truncation_threshold`"):
        f(pi_logits, mu_logits, actions, q_ret, q_all, v, 0.0)
    g = retrace.truncated_is_with_bias_correction_continuous
    x = np.zeros((5, 3), np.float32)
    with pytest.raises(ValueError, match=r"`sampled_q_values`.*\[5, 3\].*\[5, 4\]"):
        g(x, x, x, x, x, np.zeros((5, 4), np.float32), x)
    with pytest.raises(ValueError, match=r"`k`.*\[2, 3\].*\[2, 4\]"):
        retrace.trust_region_projection(np.zeros((2, 3)), np.zeros((2, 4)), 1.0)
    with pytest.raises(ValueError, match=r"`action_dim`"):
        retrace.acer_trace_coefficients(x, action_dim=0)


@pytest.mark.parametrize("jit", [False, True])
def test_unknown_static_shapes(jit, rng):
    spec2, spec1 = tf.TensorSpec([None, None]), tf.TensorSpec([None])

    @tf.function(input_signature=[spec2] * 4 + [spec1, spec2], jit_compile=jit)
    def fn(*args):
        return retrace.retrace_targets(*args).q_ret

    r, d, q, v, boot, log_rhos = _trace(rng, 6, 2)
    want = np_q_ret(r, d, q, v, boot, np.exp(log_rhos.astype(np.float64)))
    np.testing.assert_allclose(fn(r, d, q, v, boot, log_rhos).numpy(), want, atol=1e-5)
