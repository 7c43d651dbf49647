"""Tests of tfagents_vtrace.ops.vtrace against slow numpy V-trace in the paper's notation."""

import itertools

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.ops import _recurrence, vtrace

tfd = tfp.distributions

# (clip_rho_threshold, clip_pg_rho_threshold, clip_c_threshold)
THRESHOLDS = {"1.0": (1.0, 1.0, 1.0), "3.7-2.2": (3.7, 2.2, 1.3), "None": (None, None, None)}


def numpy_vtrace(
    log_rhos,
    discounts,
    rewards,
    values,
    bootstrap_value,
    rho_bar=1.0,
    pg_rho_bar=1.0,
    c_bar=1.0,
    lambda_=1.0,
):
    """IMPALA eq. 1 as a double sum, with explicit loops over time (float64).

    v_s = V(x_s) + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) delta_t V,
    delta_t V = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)),
    A_s = rho^pg_s (r_s + gamma_s v_{s+1} - V(x_s)), with V(x_T) = v_T = bootstrap_value.
    Arrays are [T, ...]; everything after the time axis is elementwise.
    """
    log_rhos, discounts, rewards, values, bootstrap_value = (
        np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value)
    )
    num_steps = len(rewards)
    ratio = np.exp(log_rhos)
    rho = ratio if rho_bar is None else np.minimum(rho_bar, ratio)
    c = lambda_ * (ratio if c_bar is None else np.minimum(c_bar, ratio))
    rho_pg = ratio if pg_rho_bar is None else np.minimum(pg_rho_bar, ratio)
    big_v = list(values) + [bootstrap_value]  # V(x_0) .. V(x_T)
    vs = []
    for s in range(num_steps):
        v_s = big_v[s].copy()
        for t in range(s, num_steps):
            trace = np.ones_like(v_s)
            for i in range(s, t):
                trace = trace * discounts[i] * c[i]
            delta_t = rho[t] * (rewards[t] + discounts[t] * big_v[t + 1] - big_v[t])
            v_s = v_s + trace * delta_t
        vs.append(v_s)
    vs_next = vs[1:] + [bootstrap_value]
    advantages = [
        rho_pg[s] * (rewards[s] + discounts[s] * vs_next[s] - values[s]) for s in range(num_steps)
    ]
    return np.array(vs), np.array(advantages)


def make_inputs(rng, num_steps, batch, extra=()):
    """float32 V-trace inputs; an episode ends (discount 0) in the middle of the trace."""
    shape = (num_steps, batch, *extra)
    discounts = rng.uniform(0.8, 1.0, shape)
    if num_steps >= 3:
        discounts[num_steps // 2] = 0.0
    arrays = dict(
        log_rhos=rng.normal(0.0, 1.0, shape),
        discounts=discounts,
        rewards=rng.normal(size=shape),
        values=rng.normal(size=shape),
        bootstrap_value=rng.normal(size=shape[1:]),
    )
    return {k: v.astype(np.float32) for k, v in arrays.items()}


def _grid(modes):
    grid = itertools.product(modes, (1, 5, 37), (1, 5), (1.0, 0.9), THRESHOLDS)
    # Traced modes: B = 5 only (B = 1 runs eagerly); XLA: fewer T, to keep compile time down.
    return [g for g in grid if g[0] == "eager" or (g[2] == 5 and (g[0] == "function" or g[1] != 5))]


@pytest.mark.parametrize("mode,num_steps,batch,lambda_,thresholds", _grid(RUN_MODES))
def test_from_importance_weights_matches_numpy(rng, mode, num_steps, batch, lambda_, thresholds):
    rho_bar, pg_rho_bar, c_bar = THRESHOLDS[thresholds]
    inputs = make_inputs(rng, num_steps, batch)
    fn = run_in_mode(
        lambda *args: vtrace.from_importance_weights(
            *args,
            clip_rho_threshold=rho_bar,
            clip_pg_rho_threshold=pg_rho_bar,
            clip_c_threshold=c_bar,
            lambda_=lambda_,
        ),
        mode,
    )
    out = fn(*inputs.values())
    want_vs, want_adv = numpy_vtrace(*inputs.values(), rho_bar, pg_rho_bar, c_bar, lambda_)
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)
    assert out.vs.dtype == tf.float32 and out.vs.shape == (num_steps, batch)


@pytest.mark.parametrize("mode", RUN_MODES)
def test_extra_trailing_dims(rng, mode):
    inputs = make_inputs(rng, 7, 3, extra=(4,))
    fn = run_in_mode(lambda *a: vtrace.from_importance_weights(*a, lambda_=0.9), mode)
    out = fn(*inputs.values())
    want_vs, want_adv = numpy_vtrace(*inputs.values(), lambda_=0.9)
    assert out.vs.shape == (7, 3, 4)
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", RUN_MODES)
def test_split_episode_equals_episodes_apart(rng, mode):
    """A trace holding two episodes cut by a zero discount = the two computed apart."""
    inputs = make_inputs(rng, 11, 4)
    inputs["discounts"][:] = 0.95
    inputs["discounts"][5] = 0.0  # the first episode ends at step 5
    fn = run_in_mode(
        lambda log_rhos, discounts, rewards, values, bootstrap_value: (
            vtrace.from_importance_weights(
                log_rhos, discounts, rewards, values, bootstrap_value, lambda_=0.9
            )
        ),
        mode,
    )
    whole = fn(*inputs.values())
    first_half = {k: v[:6] for k, v in inputs.items() if k != "bootstrap_value"}
    # Bootstrap of the first episode: V(x_6); it is multiplied by the zero discount anyway.
    first = fn(**first_half, bootstrap_value=inputs["values"][6])
    second_half = {k: v[6:] for k, v in inputs.items() if k != "bootstrap_value"}
    second = fn(**second_half, bootstrap_value=inputs["bootstrap_value"])
    for field in ("vs", "pg_advantages"):
        apart = np.concatenate([getattr(first, field), getattr(second, field)])
        np.testing.assert_allclose(getattr(whole, field).numpy(), apart, rtol=1e-6, atol=1e-6)


def test_outputs_receive_no_gradient(rng):
    inputs = {k: tf.Variable(v) for k, v in make_inputs(rng, 6, 3).items()}
    with tf.GradientTape(persistent=True) as tape:
        out = vtrace.from_importance_weights(**inputs)
        total = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
    for name, var in inputs.items():
        assert tape.gradient(total, var) is None, name


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_from_logits_gradients_reach_target_logits_only_through_log_probs(rng, mode):
    num_steps, batch, num_actions = 5, 3, 4
    target = tf.Variable(rng.normal(size=(num_steps, batch, num_actions)).astype(np.float32))
    behaviour = tf.Variable(rng.normal(size=(num_steps, batch, num_actions)).astype(np.float32))
    actions = rng.integers(0, num_actions, (num_steps, batch)).astype(np.int32)
    inputs = make_inputs(rng, num_steps, batch)
    values = tf.Variable(inputs["values"])

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            out = vtrace.from_logits(
                behaviour,
                target,
                actions,
                inputs["discounts"],
                inputs["rewards"],
                values,
                inputs["bootstrap_value"],
            )
            targets = tf.reduce_sum(out.vs) + tf.reduce_sum(out.pg_advantages)
            log_pi = tf.reduce_sum(out.target_action_log_probs)
            log_rho = tf.reduce_sum(out.log_rhos)
        return (
            [tape.gradient(targets, v) for v in (target, behaviour, values)],
            tape.gradient(log_pi, target),
            tape.gradient(log_rho, behaviour),
        )

    target_grads, grad_log_pi, grad_log_rho_behaviour = run_in_mode(grads, mode)()
    assert all(g is None for g in target_grads)
    # d/dlogits sum_t log softmax(logits_t)[a_t] = onehot(a_t) - softmax(logits_t).
    probs = tf.nn.softmax(target).numpy()
    want = np.eye(num_actions)[actions] - probs
    np.testing.assert_allclose(grad_log_pi.numpy(), want, rtol=1e-5, atol=1e-6)
    behaviour_probs = tf.nn.softmax(behaviour).numpy()
    want_b = behaviour_probs - np.eye(num_actions)[actions]
    np.testing.assert_allclose(grad_log_rho_behaviour.numpy(), want_b, rtol=1e-5, atol=1e-6)


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


@pytest.mark.parametrize("mode", RUN_MODES)
def test_from_logits_matches_numpy(rng, mode):
    num_steps, batch, num_actions = 9, 2, 3
    behaviour = rng.normal(size=(num_steps, batch, num_actions)).astype(np.float32)
    target = rng.normal(size=(num_steps, batch, num_actions)).astype(np.float32)
    actions = rng.integers(0, num_actions, (num_steps, batch)).astype(np.int32)
    inputs = make_inputs(rng, num_steps, batch)
    del inputs["log_rhos"]
    fn = run_in_mode(lambda *a: vtrace.from_logits(*a, clip_rho_threshold=2.0), mode)
    out = fn(behaviour, target, actions, *inputs.values())
    take = lambda logits: np.take_along_axis(_log_softmax(logits), actions[..., None], -1)[..., 0]
    log_rhos = take(target.astype(np.float64)) - take(behaviour.astype(np.float64))
    np.testing.assert_allclose(out.log_rhos.numpy(), log_rhos, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out.target_action_log_probs.numpy(), take(target), rtol=1e-5)
    np.testing.assert_allclose(out.behaviour_action_log_probs.numpy(), take(behaviour), rtol=1e-5)
    want_vs, want_adv = numpy_vtrace(log_rhos, *inputs.values(), rho_bar=2.0)
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


def test_from_distributions_categorical_equals_from_logits(rng):
    behaviour = rng.normal(size=(6, 3, 5)).astype(np.float32)
    target = rng.normal(size=(6, 3, 5)).astype(np.float32)
    actions = rng.integers(0, 5, (6, 3)).astype(np.int32)
    inputs = make_inputs(rng, 6, 3)
    del inputs["log_rhos"]
    want = vtrace.from_logits(behaviour, target, actions, *inputs.values(), lambda_=0.9)
    got = vtrace.from_distributions(
        tfd.Categorical(logits=behaviour),
        tfd.Categorical(logits=target),
        actions,
        *inputs.values(),
        lambda_=0.9,
    )
    for field in want._fields:
        np.testing.assert_allclose(getattr(got, field), getattr(want, field), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_from_distributions_diagonal_normal_sums_over_event(rng, mode):
    num_steps, batch, dims = 5, 2, 3
    mu_b, mu_t = (rng.normal(size=(num_steps, batch, dims)).astype(np.float32) for _ in "bt")
    sd_b, sd_t = (rng.uniform(0.5, 1.5, (num_steps, batch, dims)).astype(np.float32) for _ in "bt")
    actions = rng.normal(size=(num_steps, batch, dims)).astype(np.float32)
    inputs = make_inputs(rng, num_steps, batch)
    del inputs["log_rhos"]

    def run(independent):
        def dist(mu, sd):
            normal = tfd.Normal(mu, sd)
            return tfd.Independent(normal, 1) if independent else normal

        return vtrace.from_distributions(
            dist(mu_b, sd_b), dist(mu_t, sd_t), actions, *inputs.values()
        )

    independent = run_in_mode(lambda: run(True), mode)()
    per_dim = run_in_mode(lambda: run(False), mode)()
    logpdf = lambda mu, sd: (
        -0.5 * ((actions - mu) / sd) ** 2 - np.log(sd) - 0.5 * np.log(2 * np.pi)
    ).sum(-1)
    want_log_rhos = logpdf(mu_t, sd_t) - logpdf(mu_b, sd_b)
    want_vs, want_adv = numpy_vtrace(want_log_rhos, *inputs.values())
    for out in (independent, per_dim):
        assert out.log_rhos.shape == (num_steps, batch)
        np.testing.assert_allclose(out.log_rhos.numpy(), want_log_rhos, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


# --- properties at edge values (hypothesis) ---------------------------------------------------

_floats = st.floats(-3.0, 3.0, width=32)


@st.composite
def traces(draw):
    num_steps, batch = draw(st.integers(1, 9)), draw(st.integers(1, 3))
    arr = lambda shape, elements: draw(hnp.arrays(np.float32, shape, elements=elements))
    return dict(
        log_rhos=arr((num_steps, batch), _floats),
        discounts=arr((num_steps, batch), st.sampled_from([0.0, 0.5, 0.9, 1.0])),
        rewards=arr((num_steps, batch), _floats),
        values=arr((num_steps, batch), _floats),
        bootstrap_value=arr((batch,), _floats),
    )


@settings(max_examples=30, deadline=None)
@given(traces(), st.sampled_from([0.0, 0.5, 1.0]))
def test_on_policy_vs_are_lambda_returns(trace, lambda_):
    """rho = 1: v_s is the TD(lambda) return (n-step return for lambda = 1)."""
    trace["log_rhos"][:] = 0.0
    out = vtrace.from_importance_weights(**trace, lambda_=lambda_)
    rewards, discounts, values = trace["rewards"], trace["discounts"], trace["values"]
    ret = trace["bootstrap_value"].astype(np.float64)
    next_value = ret
    want = np.zeros(rewards.shape)
    for t in reversed(range(len(rewards))):  # G_t = r_t + g_t ((1 - l) V(x_{t+1}) + l G_{t+1})
        ret = rewards[t] + discounts[t] * ((1 - lambda_) * next_value + lambda_ * ret)
        want[t], next_value = ret, values[t]
    np.testing.assert_allclose(out.vs.numpy(), want, rtol=1e-4, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(traces())
def test_lambda_zero_is_one_step_td_target(trace):
    out = vtrace.from_importance_weights(**trace, lambda_=0.0)
    values_next = np.concatenate([trace["values"][1:], trace["bootstrap_value"][None]])
    rho = np.minimum(1.0, np.exp(trace["log_rhos"].astype(np.float64)))
    td = trace["rewards"] + trace["discounts"] * values_next - trace["values"]
    np.testing.assert_allclose(out.vs.numpy(), trace["values"] + rho * td, rtol=1e-4, atol=1e-4)


@settings(max_examples=30, deadline=None)
@given(traces())
def test_gamma_zero(trace):
    trace["discounts"][:] = 0.0
    out = vtrace.from_importance_weights(**trace, clip_pg_rho_threshold=None)
    ratio = np.exp(trace["log_rhos"].astype(np.float64))
    error = trace["rewards"] - trace["values"]
    np.testing.assert_allclose(
        out.vs.numpy(), trace["values"] + np.minimum(1, ratio) * error, rtol=1e-4, atol=1e-4
    )
    np.testing.assert_allclose(out.pg_advantages.numpy(), ratio * error, rtol=1e-4, atol=1e-4)


# --- validation -------------------------------------------------------------------------------


def _bad(inputs, **changes):
    return {**inputs, **changes}


@pytest.mark.parametrize(
    "changes,match",
    [
        (dict(values=np.zeros((5,), np.float32)), r"`values` must have rank >= 2.*\[5\]"),
        (dict(rewards=np.zeros((6, 3), np.float32)), r"`rewards`.*\[5, 3\].*\[6, 3\]"),
        (dict(log_rhos=np.zeros((5, 2), np.float32)), r"`log_rhos`.*\[5, 3\].*\[5, 2\]"),
        (dict(bootstrap_value=np.zeros((4,), np.float32)), r"`bootstrap_value`.*\[3\].*\[4\]"),
        (dict(values=np.zeros((5, 3), np.int32)), r"`values`.*floating.*int32"),
        (dict(bootstrap_value=np.zeros((3,), np.int64)), r"`bootstrap_value`.*floating.*int64"),
        (dict(rewards=np.zeros((5, 3), bool)), r"`rewards`.*floating.*bool"),
        (dict(discounts=np.zeros((5, 3, 1), np.float32)), r"`discounts`.*\[5, 3\].*\[5, 3, 1\]"),
    ],
)
def test_bad_input_raises(rng, changes, match):
    inputs = make_inputs(rng, 5, 3)
    with pytest.raises(ValueError, match=match):
        vtrace.from_importance_weights(**_bad(inputs, **changes))


def test_bad_threshold_and_logits_raise(rng):
    inputs = make_inputs(rng, 5, 3)
    with pytest.raises(ValueError, match=r"`clip_rho_threshold` must have rank 0"):
        vtrace.from_importance_weights(**inputs, clip_rho_threshold=[1.0, 2.0])
    del inputs["log_rhos"]
    logits = np.zeros((5, 3, 4), np.float32)
    actions = np.zeros((5, 3), np.int32)
    with pytest.raises(ValueError, match=r"`target_policy_logits` must have rank 3.*\[5, 3\]"):
        vtrace.from_logits(logits, logits[..., 0], actions, *inputs.values())
    with pytest.raises(ValueError, match=r"`actions`.*\[5, 3\].*\[5, 2\]"):
        vtrace.from_logits(logits, logits, actions[:, :2], *inputs.values())
    with pytest.raises(ValueError, match=r"`actions` must be an integer"):
        vtrace.log_probs_from_logits_and_actions(logits, actions.astype(np.float32))
    with pytest.raises(ValueError, match=r"`rewards`.*\[5, 3\].*\[4, 3\]"):
        vtrace.from_logits(
            logits,
            logits,
            actions,
            inputs["discounts"],
            inputs["rewards"][:4],
            inputs["values"],
            inputs["bootstrap_value"],
        )


def test_xla_mode_takes_the_fused_path():
    """The XLA tests above exercise the fused loop; the other modes the vectorized path."""
    flags = {
        m: run_in_mode(lambda: tf.constant(_recurrence.in_xla_context()), m)() for m in RUN_MODES
    }
    assert flags == {"eager": False, "function": False, "xla": True}


def test_unknown_time_and_batch_dims(rng):
    """A graph traced with [None, None] inputs (the padded chunk loop) for several T."""
    spec = tf.TensorSpec([None, None], tf.float32)
    fn = tf.function(
        lambda *a: vtrace.from_importance_weights(*a, lambda_=0.9),
        input_signature=[spec] * 4 + [tf.TensorSpec([None], tf.float32)],
    )
    for num_steps in (1, 16, 17, 40):
        inputs = make_inputs(rng, num_steps, 2)
        out = fn(*inputs.values())
        want_vs, want_adv = numpy_vtrace(*inputs.values(), lambda_=0.9)
        np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", RUN_MODES)
def test_large_rows(rng, mode):
    """Rows of >= _recurrence._LARGE_ROW elements take the per-step loop in graph mode."""
    inputs = make_inputs(rng, 6, _recurrence._LARGE_ROW)
    out = run_in_mode(lambda *a: vtrace.from_importance_weights(*a, lambda_=0.9), mode)(
        *inputs.values()
    )
    want_vs, want_adv = numpy_vtrace(*inputs.values(), lambda_=0.9)
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


# --- scalable_agent's call signature: `name`, keyword-only extensions, integer rewards --------


def _scopes(fn, *specs):
    """The name scope (first path component) of every op ``fn`` creates, inputs aside."""
    graph = tf.function(fn).get_concrete_function(*specs).graph
    ops = [op for op in graph.get_operations() if op.type not in ("Placeholder", "Identity")]
    assert ops
    return {op.name for op in ops}


def _specs(num_steps, batch, num_actions=None):
    spec = tf.TensorSpec([num_steps, batch], tf.float32)
    if num_actions is None:
        return [spec] * 4 + [tf.TensorSpec([batch], tf.float32)]
    logits = tf.TensorSpec([num_steps, batch, num_actions], tf.float32)
    actions = tf.TensorSpec([num_steps, batch], tf.int32)
    return [logits, logits, actions] + [spec] * 3 + [tf.TensorSpec([batch], tf.float32)]


@pytest.mark.parametrize("mode", RUN_MODES)
def test_reference_positional_call_with_name(rng, mode):
    """scalable_agent's callers pass (..., clip_rho, clip_pg_rho, name) positionally."""
    inputs = make_inputs(rng, 7, 3)
    fn = run_in_mode(lambda *a: vtrace.from_importance_weights(*a, 2.0, 1.5, "my_vtrace"), mode)
    out = fn(*inputs.values())
    want_vs, want_adv = numpy_vtrace(*inputs.values(), rho_bar=2.0, pg_rho_bar=1.5, c_bar=1.0)
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)

    logits = [rng.normal(size=(7, 3, 4)).astype(np.float32) for _ in "bt"]
    actions = rng.integers(0, 4, (7, 3)).astype(np.int32)
    del inputs["log_rhos"]
    got = run_in_mode(lambda *a: vtrace.from_logits(*a, 2.0, 1.5, "my_vtrace"), mode)(
        *logits, actions, *inputs.values()
    )
    take = lambda x: np.take_along_axis(_log_softmax(x.astype(np.float64)), actions[..., None], -1)
    log_rhos = (take(logits[1]) - take(logits[0]))[..., 0]
    want_vs, want_adv = numpy_vtrace(log_rhos, *inputs.values(), rho_bar=2.0, pg_rho_bar=1.5)
    np.testing.assert_allclose(got.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


def test_name_is_the_name_scope_of_every_op():
    """The reference's defaults, a given name, the nesting from_logits -> importance weights."""
    default = _scopes(vtrace.from_importance_weights, *_specs(5, 2))
    assert all(n.startswith("vtrace_from_importance_weights/") for n in default), default
    named = _scopes(lambda *a: vtrace.from_importance_weights(*a, name="my_vtrace"), *_specs(5, 2))
    assert all(n.startswith("my_vtrace/") for n in named), named
    logits = _scopes(vtrace.from_logits, *_specs(5, 2, 3))
    assert all(n.startswith("vtrace_from_logits/") for n in logits), logits
    assert any(n.startswith("vtrace_from_logits/vtrace_from_importance_weights/") for n in logits)
    no_scope = _scopes(lambda *a: vtrace.from_importance_weights(*a, name=None), *_specs(5, 2))
    assert not any("/" in n and n.startswith("vtrace") for n in no_scope)


def test_extensions_are_keyword_only(rng):
    inputs = list(make_inputs(rng, 5, 3).values())
    with pytest.raises(ValueError, match=r"`name` must be a string.*float 1\.3.*keyword-only"):
        vtrace.from_importance_weights(*inputs, 1.0, 1.0, 1.3)  # old slot of clip_c_threshold
    with pytest.raises(TypeError):
        vtrace.from_importance_weights(*inputs, 1.0, 1.0, "v", 1.0)
    logits = np.zeros((5, 3, 4), np.float32)
    actions = np.zeros((5, 3), np.int32)
    with pytest.raises(ValueError, match=r"`name` must be a string"):
        vtrace.from_logits(logits, logits, actions, *inputs[1:], 1.0, 1.0, 0.9)
    with pytest.raises(TypeError):
        vtrace.from_logits(logits, logits, actions, *inputs[1:], 1.0, 1.0, "v", 1.0)


@pytest.mark.parametrize("mode", RUN_MODES)
@pytest.mark.parametrize("int_dtype", [np.int32, np.int64])
def test_integer_rewards_are_cast(rng, mode, int_dtype):
    """scalable_agent converts rewards to float (tf.convert_to_tensor(rewards, tf.float32))."""
    inputs = make_inputs(rng, 9, 3)
    int_rewards = rng.integers(-3, 4, (9, 3)).astype(int_dtype)
    fn = run_in_mode(lambda *a: vtrace.from_importance_weights(*a, clip_c_threshold=1.3), mode)
    out = fn(*{**inputs, "rewards": int_rewards}.values())
    want_vs, want_adv = numpy_vtrace(*{**inputs, "rewards": int_rewards}.values(), c_bar=1.3)
    assert out.vs.dtype == tf.float32
    np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


def test_integer_rewards_tensor_list_and_float64(rng):
    """Integer tf tensors and Python lists too; the cast follows the dtype of log_rhos."""
    inputs = make_inputs(rng, 6, 2)
    int_rewards = rng.integers(-3, 4, (6, 2))
    want_vs, want_adv = numpy_vtrace(*{**inputs, "rewards": int_rewards}.values())
    for rewards in (tf.constant(int_rewards, tf.int32), int_rewards.tolist()):
        out = vtrace.from_importance_weights(**{**inputs, "rewards": rewards})
        np.testing.assert_allclose(out.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
    f64 = {k: tf.constant(v, tf.float64) for k, v in inputs.items()}
    out = vtrace.from_importance_weights(**{**f64, "rewards": tf.constant(int_rewards)})
    assert out.vs.dtype == tf.float64
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


def test_integer_rewards_in_from_logits_and_from_distributions(rng):
    num_steps, batch, num_actions = 6, 3, 4
    behaviour, target = (rng.normal(size=(num_steps, batch, num_actions)) for _ in "bt")
    behaviour, target = behaviour.astype(np.float32), target.astype(np.float32)
    actions = rng.integers(0, num_actions, (num_steps, batch)).astype(np.int32)
    inputs = make_inputs(rng, num_steps, batch)
    del inputs["log_rhos"]
    inputs["rewards"] = rng.integers(0, 2, (num_steps, batch)).astype(np.int64)
    take = lambda x: np.take_along_axis(_log_softmax(x.astype(np.float64)), actions[..., None], -1)
    log_rhos = (take(target) - take(behaviour))[..., 0]
    want_vs, want_adv = numpy_vtrace(log_rhos, *inputs.values(), lambda_=0.9)
    got_logits = vtrace.from_logits(behaviour, target, actions, *inputs.values(), lambda_=0.9)
    got_dists = vtrace.from_distributions(
        tfd.Categorical(logits=behaviour),
        tfd.Categorical(logits=target),
        actions,
        *inputs.values(),
        lambda_=0.9,
    )
    for got in (got_logits, got_dists):
        np.testing.assert_allclose(got.vs.numpy(), want_vs, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(got.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"`values`.*floating.*int64"):
        vtrace.from_logits(
            behaviour, target, actions, *{**inputs, "values": inputs["rewards"]}.values()
        )
