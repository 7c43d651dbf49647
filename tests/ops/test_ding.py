"""Tests of tfagents_vtrace.ops.ding against numpy written from DI-engine's documentation."""

import numpy as np
import pytest
import tensorflow as tf

from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.ops import ding, vtrace

SETTINGS = {  # gamma, lambda_, rho_clip_ratio, c_clip_ratio, rho_pg_clip_ratio
    "defaults": (0.99, 0.95, 1.0, 1.0, 1.0),
    "loose": (0.9, 1.0, 2.5, 1.7, 3.0),
}


def numpy_vtrace_losses(
    target_lp,
    behaviour_lp,
    entropy,
    value,
    reward,
    weight,
    gamma,
    lambda_,
    rho_clip,
    c_clip,
    pg_clip,
):
    """ding.rl_utils.vtrace.vtrace_error_* in numpy: loops over time, float64."""
    ratio = np.exp(target_lp - behaviour_lp)
    rhos, cs, pg_rhos = (np.minimum(ratio, clip) for clip in (rho_clip, c_clip, pg_clip))
    num_steps = len(reward)
    # vtrace_nstep_return
    deltas = rhos * (reward + gamma * value[1:] - value[:-1])
    result = value[:-1].copy()
    item = np.zeros_like(value[0])
    for t in reversed(range(num_steps)):
        item = deltas[t] + gamma * lambda_ * cs[t] * item
        result[t] = result[t] + item
    # vtrace_advantage with return_t_plus_1 = cat(return_[1:], value[-1:])
    return_t_plus_1 = np.concatenate([result[1:], value[-1:]])
    adv = pg_rhos * (reward + gamma * return_t_plus_1 - value[:-1])
    weight = np.ones_like(reward) if weight is None else weight
    return (
        (
            -(target_lp * adv * weight).mean(),
            ((value[:-1] - result) ** 2 * weight).mean(),
            (entropy * weight).mean(),
        ),
        result,
        adv,
    )


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def discrete_data(rng, num_steps, batch, num_actions=4, weighted=True):
    f32 = lambda x: np.asarray(x, np.float32)
    return ding.vtrace_data(
        target_output=f32(rng.normal(size=(num_steps, batch, num_actions))),
        behaviour_output=f32(rng.normal(size=(num_steps, batch, num_actions))),
        action=rng.integers(0, num_actions, (num_steps, batch)).astype(np.int32),
        value=f32(rng.normal(size=(num_steps + 1, batch))),
        reward=f32(rng.uniform(size=(num_steps, batch))),
        weight=f32(rng.uniform(size=(num_steps, batch))) if weighted else None,
    )


def continuous_data(rng, num_steps, batch, dims=3, weighted=True):
    f32 = lambda x: np.asarray(x, np.float32)
    gaussian = lambda: {
        "mu": f32(rng.normal(size=(num_steps, batch, dims))),
        "sigma": f32(np.exp(0.3 * rng.normal(size=(num_steps, batch, dims)))),
    }
    return ding.vtrace_data(
        target_output=gaussian(),
        behaviour_output=gaussian(),
        action=f32(rng.normal(size=(num_steps, batch, dims))),
        value=f32(rng.normal(size=(num_steps + 1, batch))),
        reward=f32(rng.uniform(size=(num_steps, batch))),
        weight=f32(rng.uniform(size=(num_steps, batch))) if weighted else None,
    )


def numpy_discrete(data, settings):
    f64 = lambda x: np.asarray(x, np.float64)
    log_pi, log_mu = _log_softmax(f64(data.target_output)), _log_softmax(f64(data.behaviour_output))
    take = lambda lp: np.take_along_axis(lp, data.action[..., None], -1)[..., 0]
    entropy = -(np.exp(log_pi) * log_pi).sum(-1)
    weight = None if data.weight is None else f64(data.weight)
    return numpy_vtrace_losses(
        take(log_pi), take(log_mu), entropy, f64(data.value), f64(data.reward), weight, *settings
    )


def numpy_continuous(data, settings):
    f64 = lambda x: np.asarray(x, np.float64)
    action = f64(data.action)

    def log_prob(out):  # Independent(Normal(mu, sigma), 1)
        mu, sigma = f64(out["mu"]), f64(out["sigma"])
        return (-0.5 * ((action - mu) / sigma) ** 2 - np.log(sigma) - 0.5 * np.log(2 * np.pi)).sum(
            -1
        )

    entropy = (0.5 + 0.5 * np.log(2 * np.pi) + np.log(f64(data.target_output["sigma"]))).sum(-1)
    weight = None if data.weight is None else f64(data.weight)
    return numpy_vtrace_losses(
        log_prob(data.target_output),
        log_prob(data.behaviour_output),
        entropy,
        f64(data.value),
        f64(data.reward),
        weight,
        *settings,
    )


def _grid():
    for mode in RUN_MODES:
        for num_steps, batch in ((1, 1), (5, 3), (37, 5)):
            for setting in SETTINGS:
                for weighted in (False, True):
                    if mode == "xla" and (num_steps, weighted) not in ((37, True), (1, False)):
                        continue  # a smaller XLA grid, for compile time
                    yield mode, num_steps, batch, setting, weighted


def _call(fn, data, settings, mode):
    gamma, lambda_, rho, c, pg = settings
    run = run_in_mode(
        lambda target, behaviour, action, value, reward, weight: fn(
            ding.vtrace_data(target, behaviour, action, value, reward, weight),
            gamma=gamma,
            lambda_=lambda_,
            rho_clip_ratio=rho,
            c_clip_ratio=c,
            rho_pg_clip_ratio=pg,
        ),
        mode,
    )
    return run(*data)


@pytest.mark.parametrize("mode,num_steps,batch,setting,weighted", list(_grid()))
def test_discrete_matches_numpy(rng, mode, num_steps, batch, setting, weighted):
    data = discrete_data(rng, num_steps, batch, weighted=weighted)
    got = _call(ding.vtrace_error_discrete_action, data, SETTINGS[setting], mode)
    want, _, _ = numpy_discrete(data, SETTINGS[setting])
    assert isinstance(got, ding.vtrace_loss) and got.policy_loss.shape == ()
    np.testing.assert_allclose([x.numpy() for x in got], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode,num_steps,batch,setting,weighted", list(_grid()))
def test_continuous_matches_numpy(rng, mode, num_steps, batch, setting, weighted):
    data = continuous_data(rng, num_steps, batch, weighted=weighted)
    got = _call(ding.vtrace_error_continuous_action, data, SETTINGS[setting], mode)
    want, _, _ = numpy_continuous(data, SETTINGS[setting])
    np.testing.assert_allclose([x.numpy() for x in got], want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", RUN_MODES)
def test_nstep_return_and_advantage_match_numpy(rng, mode):
    num_steps, batch = 9, 4
    ratio = np.exp(rng.normal(size=(num_steps, batch)))
    rhos, cs, pg_rhos = np.minimum(ratio, 1.5), np.minimum(ratio, 1.0), np.minimum(ratio, 2.0)
    reward = rng.normal(size=(num_steps, batch))
    value = rng.normal(size=(num_steps + 1, batch))
    f32 = lambda *xs: [np.asarray(x, np.float32) for x in xs]
    ret = run_in_mode(lambda *a: ding.vtrace_nstep_return(*a, gamma=0.9, lambda_=0.8), mode)(
        *f32(rhos, cs, reward, value)
    )
    adv = run_in_mode(lambda *a: ding.vtrace_advantage(*a, gamma=0.9), mode)(
        *f32(pg_rhos, reward, np.concatenate([ret.numpy()[1:], value[-1:]]), value[:-1])
    )
    want = value[:-1].copy()
    for s in range(num_steps):  # the double sum: sum_t (gamma lambda)^(t-s) prod c * delta_t
        for t in range(s, num_steps):
            trace = (0.9 * 0.8) ** (t - s) * np.prod(cs[s:t], axis=0)
            want[s] += trace * rhos[t] * (reward[t] + 0.9 * value[t + 1] - value[t])
    want_adv = pg_rhos * (reward + 0.9 * np.concatenate([want[1:], value[-1:]]) - value[:-1])
    np.testing.assert_allclose(ret.numpy(), want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adv.numpy(), want_adv, rtol=1e-4, atol=1e-4)


def test_targets_equal_vtrace_op_with_constant_discount(rng):
    """Peer check: the DI-engine return = our V-trace op with discounts = gamma."""
    data = discrete_data(rng, 12, 3)
    gamma, lambda_, rho, c, pg = SETTINGS["loose"]
    _, want_ret, want_adv = numpy_discrete(data, SETTINGS["loose"])
    log_rhos = vtrace.log_probs_from_logits_and_actions(
        data.target_output, data.action
    ) - vtrace.log_probs_from_logits_and_actions(data.behaviour_output, data.action)
    out = vtrace.from_importance_weights(
        log_rhos,
        np.full_like(data.reward, gamma),
        data.reward,
        data.value[:-1],
        data.value[-1],
        clip_rho_threshold=rho,
        clip_pg_rho_threshold=pg,
        clip_c_threshold=c,
        lambda_=lambda_,
    )
    np.testing.assert_allclose(out.vs.numpy(), want_ret, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(out.pg_advantages.numpy(), want_adv, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_discrete_gradients_reach_target_and_value_only(rng, mode):
    num_steps, batch, num_actions = 6, 3, 4
    data = discrete_data(rng, num_steps, batch, num_actions)
    target, behaviour, value, reward = (
        tf.Variable(x) for x in (data.target_output, data.behaviour_output, data.value, data.reward)
    )
    settings = SETTINGS["loose"]

    def grads():
        with tf.GradientTape(persistent=True) as tape:
            loss = ding.vtrace_error_discrete_action(
                ding.vtrace_data(target, behaviour, data.action, value, reward, data.weight),
                *settings,
            )
        variables = (target, behaviour, value, reward)
        return [[tape.gradient(term, v) for v in variables] for term in loss]

    (pg_g, value_g, ent_g) = run_in_mode(grads, mode)()
    _, ret, adv = numpy_discrete(data, settings)
    n = num_steps * batch
    probs = tf.nn.softmax(data.target_output).numpy()
    onehot = np.eye(num_actions)[data.action]
    w = data.weight[..., None]
    # policy loss: -mean(log pi(a) adv w) -> -(onehot - softmax) adv w / n, on the target only
    np.testing.assert_allclose(
        pg_g[0].numpy(), -(onehot - probs) * (adv[..., None] * w) / n, rtol=1e-4, atol=1e-6
    )
    assert pg_g[1] is None and pg_g[3] is None
    assert pg_g[2] is None or not np.any(pg_g[2].numpy())
    # value loss: 2 (V - v) w / n on value[:-1], nothing on value[-1]
    want_value_grad = np.concatenate([2 * (data.value[:-1] - ret) * data.weight / n, [[0] * batch]])
    np.testing.assert_allclose(value_g[2].numpy(), want_value_grad, rtol=1e-4, atol=1e-6)
    assert value_g[0] is None and value_g[1] is None and value_g[3] is None
    # entropy loss reaches the target logits only
    assert np.any(ent_g[0].numpy()) and ent_g[1] is None and ent_g[2] is None


def test_continuous_gradients_reach_target_and_value_only(rng):
    data = continuous_data(rng, 5, 2)
    target = {k: tf.Variable(v) for k, v in data.target_output.items()}
    behaviour = {k: tf.Variable(v) for k, v in data.behaviour_output.items()}
    value = tf.Variable(data.value)
    with tf.GradientTape(persistent=True) as tape:
        loss = ding.vtrace_error_continuous_action(
            ding.vtrace_data(target, behaviour, data.action, value, data.reward, data.weight)
        )
        total = loss.policy_loss + loss.value_loss - 0.01 * loss.entropy_loss
    assert all(np.any(tape.gradient(total, target[k]).numpy()) for k in ("mu", "sigma"))
    assert all(tape.gradient(total, behaviour[k]) is None for k in ("mu", "sigma"))
    value_grad = tape.gradient(total, value).numpy()
    assert np.any(value_grad[:-1]) and not np.any(value_grad[-1])
    # d entropy / d sigma = w / (sigma n) for each action dim
    grad_sigma = tape.gradient(loss.entropy_loss, target["sigma"]).numpy()
    want = data.weight[..., None] / data.target_output["sigma"] / data.weight.size
    np.testing.assert_allclose(grad_sigma, want, rtol=1e-5)


def test_integer_mask_weight_and_none_weight(rng):
    data = discrete_data(rng, 4, 2, weighted=False)
    ones = ding.vtrace_error_discrete_action(data._replace(weight=np.ones((4, 2), np.int32)))
    none = ding.vtrace_error_discrete_action(data)
    np.testing.assert_allclose([x.numpy() for x in ones], [x.numpy() for x in none], rtol=1e-6)


@pytest.mark.parametrize(
    "field,bad,match",
    [
        ("value", np.zeros((5, 3), np.float32), r"`value` must have shape \[6, 3\].*got \[5, 3\]"),
        ("reward", np.zeros((5, 2), np.float32), r"`reward`.*\[5, 3\].*\[5, 2\]"),
        ("value", np.zeros((6, 3), np.int64), r"`value`.*floating.*int64"),
        ("reward", np.zeros((5, 3), bool), r"`reward`.*floating.*bool"),
        ("weight", np.zeros((4, 3), np.float32), r"`weight`.*\[5, 3\].*\[4, 3\]"),
        ("action", np.zeros((5,), np.int32), r"`action`.*\[5, 3\].*\[5\]"),
        ("target_output", np.zeros((5, 3), np.float32), r"`target_output` must have rank 3"),
    ],
)
def test_discrete_bad_input_raises(rng, field, bad, match):
    data = discrete_data(rng, 5, 3)
    with pytest.raises(ValueError, match=match):
        ding.vtrace_error_discrete_action(data._replace(**{field: bad}))


def test_continuous_bad_input_raises(rng):
    data = continuous_data(rng, 5, 3)
    with pytest.raises(ValueError, match=r"`target_output` must be a dict with keys"):
        ding.vtrace_error_continuous_action(data._replace(target_output={"mu": data.action}))
    bad = {**data.behaviour_output, "sigma": np.ones((5, 3, 2), np.float32)}
    with pytest.raises(
        ValueError, match=r"`behaviour_output\['sigma'\]`.*\[5, 3, 3\].*\[5, 3, 2\]"
    ):
        ding.vtrace_error_continuous_action(data._replace(behaviour_output=bad))
    with pytest.raises(ValueError, match=r"`bootstrap_values`.*\[6, 3\].*\[5, 3\]"):
        ding.vtrace_nstep_return(data.reward, data.reward, data.reward, data.value[:-1])


@pytest.mark.parametrize("mode", ["eager", "function"])
def test_nstep_return_is_differentiable(rng, mode):
    """d sum_s v_s / d r_t = rho_t sum_{s<=t} prod_{i=s}^{t-1} gamma lambda c_i."""
    num_steps, batch, gamma, lambda_ = 20, 2, 0.9, 0.8
    rhos = rng.uniform(0.2, 1.0, (num_steps, batch)).astype(np.float32)
    cs = rng.uniform(0.2, 1.0, (num_steps, batch)).astype(np.float32)
    reward = tf.Variable(rng.normal(size=(num_steps, batch)).astype(np.float32))
    value = rng.normal(size=(num_steps + 1, batch)).astype(np.float32)

    def grad():
        with tf.GradientTape() as tape:
            total = tf.reduce_sum(ding.vtrace_nstep_return(rhos, cs, reward, value, gamma, lambda_))
        return tape.gradient(total, reward)

    want = np.zeros((num_steps, batch))
    for t in range(num_steps):
        for s in range(t + 1):
            want[t] += rhos[t] * np.prod(gamma * lambda_ * cs[s:t], axis=0)
    np.testing.assert_allclose(run_in_mode(grad, mode)().numpy(), want, rtol=1e-4, atol=1e-5)


# --- integer rewards (DI-engine documents `reward` as a LongTensor) ---------------------------


@pytest.mark.parametrize("mode", RUN_MODES)
@pytest.mark.parametrize("weighted", [False, True])
def test_integer_reward_is_cast(rng, mode, weighted):
    """torch promotes a LongTensor reward in the float arithmetic; we cast it the same way."""
    settings = SETTINGS["loose"]
    int_reward = rng.integers(-2, 3, (7, 3)).astype(np.int64)
    discrete = discrete_data(rng, 7, 3, weighted=weighted)._replace(reward=int_reward)
    got = _call(ding.vtrace_error_discrete_action, discrete, settings, mode)
    want, _, _ = numpy_discrete(discrete, settings)
    assert all(x.dtype == tf.float32 for x in got)
    np.testing.assert_allclose([x.numpy() for x in got], want, rtol=1e-4, atol=1e-5)
    continuous = continuous_data(rng, 7, 3, weighted=weighted)._replace(reward=int_reward)
    got = _call(ding.vtrace_error_continuous_action, continuous, settings, mode)
    want, _, _ = numpy_continuous(continuous, settings)
    np.testing.assert_allclose([x.numpy() for x in got], want, rtol=1e-4, atol=1e-5)


def test_integer_reward_in_nstep_return_and_advantage(rng):
    num_steps, batch, gamma, lambda_ = 8, 3, 0.9, 0.8
    ratio = np.exp(rng.normal(size=(num_steps, batch)))
    rhos, cs = np.minimum(ratio, 1.5), np.minimum(ratio, 1.0)
    reward = rng.integers(-2, 3, (num_steps, batch))
    value = rng.normal(size=(num_steps + 1, batch))
    f32 = lambda x: np.asarray(x, np.float32)
    for int_reward in (reward.astype(np.int64), tf.constant(reward, tf.int32)):
        ret = ding.vtrace_nstep_return(f32(rhos), f32(cs), int_reward, f32(value), gamma, lambda_)
        want = value[:-1].copy()  # the double sum of the DI-engine recursion
        for s in range(num_steps):
            for t in range(s, num_steps):
                trace = (gamma * lambda_) ** (t - s) * np.prod(cs[s:t], axis=0)
                want[s] += trace * rhos[t] * (reward[t] + gamma * value[t + 1] - value[t])
        np.testing.assert_allclose(ret.numpy(), want, rtol=1e-4, atol=1e-4)
        next_ret = f32(np.concatenate([want[1:], value[-1:]]))
        adv = ding.vtrace_advantage(f32(rhos), int_reward, next_ret, f32(value[:-1]), gamma)
        want_adv = rhos * (reward + gamma * next_ret - value[:-1])
        np.testing.assert_allclose(adv.numpy(), want_adv, rtol=1e-4, atol=1e-4)


# --- shape_fn_vtrace_discrete_action (DI-engine's shape for its HPC kernel cache) -------------


def test_shape_fn_reads_data_from_args_then_kwargs(rng):
    """DI-engine: args[0].target_output.shape if args else kwargs['data'].target_output.shape."""
    small, large = discrete_data(rng, 4, 8, num_actions=16), discrete_data(rng, 2, 3)
    shape = ding.shape_fn_vtrace_discrete_action((small,), {})
    assert shape == tf.TensorShape([4, 8, 16]) and [str(s) for s in shape] == ["4", "8", "16"]
    assert ding.shape_fn_vtrace_discrete_action((small, 0.9), {"lambda_": 1.0}) == [4, 8, 16]
    assert ding.shape_fn_vtrace_discrete_action((), {"data": large, "gamma": 0.9}) == [2, 3, 4]
    assert ding.shape_fn_vtrace_discrete_action((small,), {"data": large}) == [4, 8, 16]
    tensors = ding.vtrace_data(*(tf.constant(x) if x is not None else x for x in small))
    assert ding.shape_fn_vtrace_discrete_action((tensors,), {}) == [4, 8, 16]


def test_shape_fn_under_tf_function_and_bad_input(rng):
    data = discrete_data(rng, 4, 2, num_actions=5, weighted=False)
    shapes = []

    @tf.function(input_signature=[tf.TensorSpec([None, None, 5], tf.float32)])
    def trace(target):
        shapes.append(
            ding.shape_fn_vtrace_discrete_action((), {"data": data._replace(target_output=target)})
        )
        return target

    trace(data.target_output)
    assert shapes[0].as_list() == [None, None, 5]
    with pytest.raises(ValueError, match=r"`data` not found"):
        ding.shape_fn_vtrace_discrete_action((), {"gamma": 0.9})
    with pytest.raises(ValueError, match=r"`data.target_output` must have rank 3.*\[4, 2\]"):
        ding.shape_fn_vtrace_discrete_action((data._replace(target_output=data.value[:-1]),), {})
    with pytest.raises(ValueError, match=r"`data.target_output` must be logits.*dict"):
        ding.shape_fn_vtrace_discrete_action((continuous_data(rng, 4, 2),), {})
