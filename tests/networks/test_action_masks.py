"""Action masks (networks/action_masks.py): the masked policy's log-probabilities, importance
log-ratios and entropy against a slow numpy reference of the distribution renormalised over
the allowed actions, Discrete and MultiDiscrete; sampling and greedy actions never masked;
the mask is no torso feature; one-line errors for masks that do not fit."""

import gymnasium as gym
import numpy as np
import pytest
import tensorflow as tf

from tfagents_vtrace.agents.loss_inputs import policy_terms
from tfagents_vtrace.networks import NetInputs, NetworkConfig, make_network
from tfagents_vtrace.networks.action_masks import MASKED_LOGIT, first_all_masked
from tfagents_vtrace.runtime.acting.policies import TFPolicy, make_policy

NVEC = (3, 2, 4)
NET = NetworkConfig(hidden_sizes=(16,), policy_init_scale=3.0)  # O(1) logits: not uniform


def _space(n, mask=None):
    mask = gym.spaces.MultiBinary(n) if mask is None else mask
    return gym.spaces.Dict({"x": gym.spaces.Box(-1.0, 1.0, (3,), np.float32), "action_mask": mask})


def _masks(rng, lead, blocks):
    """Random 0/1 masks ``[*lead, sum(blocks)]`` allowing at least one action per block."""
    parts = []
    for n in blocks:
        m = (rng.random((*lead, n)) < 0.5).astype(np.int8)
        pick = rng.integers(0, n, lead)
        np.put_along_axis(m, pick[..., None], 1, axis=-1)
        parts.append(m)
    return np.concatenate(parts, axis=-1)


def _reference(raw, mask, actions, blocks):
    """Slow numpy: per row and block, log p(a) and the entropy of softmax(raw) restricted to
    the allowed entries (summed over the blocks)."""
    raw, mask = np.asarray(raw, np.float64), np.asarray(mask) > 0
    rows = raw.reshape(-1, raw.shape[-1])
    masks = mask.reshape(-1, mask.shape[-1])
    acts = np.asarray(actions).reshape(len(rows), -1)
    log_prob, entropy = np.zeros(len(rows)), np.zeros(len(rows))
    for i in range(len(rows)):
        start = 0
        for d, n in enumerate(blocks):
            logits, allowed = rows[i, start : start + n], masks[i, start : start + n]
            z = np.log(sum(np.exp(logits[j]) for j in range(n) if allowed[j]))
            log_prob[i] += logits[acts[i, d]] - z
            entropy[i] -= sum(
                np.exp(logits[j] - z) * (logits[j] - z) for j in range(n) if allowed[j]
            )
            start += n
    return log_prob.reshape(raw.shape[:-1]), entropy.reshape(raw.shape[:-1])


def _allowed_actions(rng, mask, blocks):
    """A uniformly random allowed action per row of ``mask`` (one index per block)."""
    out, start = [], 0
    for n in blocks:
        u = np.where(
            mask[..., start : start + n] > 0, rng.random(mask[..., start : start + n].shape), -1.0
        )
        out.append(np.argmax(u, axis=-1))
        start += n
    return np.stack(out, axis=-1).astype(np.int32)


@pytest.mark.parametrize("kind", ["discrete", "multi_discrete"])
def test_log_probs_ratios_and_entropy_are_the_renormalised_distributions(rng, kind):
    blocks = [6] if kind == "discrete" else list(NVEC)
    action_space = gym.spaces.Discrete(6) if kind == "discrete" else gym.spaces.MultiDiscrete(NVEC)
    space = _space(sum(blocks))
    target_net = make_network(NET, space, action_space)
    behaviour_net = make_network(NET, space, action_space)  # other weights: log_rho != 0
    t, b = 5, 7
    x = rng.uniform(-1, 1, (t, b, 3)).astype(np.float32)
    mask = _masks(rng, (t, b), blocks)
    actions = _allowed_actions(rng, mask, blocks)
    if kind == "discrete":
        actions = actions[..., 0]
    prev = tf.zeros((t, b, *action_space.shape), tf.int32)
    obs = {"x": x, "action_mask": mask}
    inputs = NetInputs(obs, np.zeros((t, b), bool), prev, np.zeros((t, b), np.float32))
    unmasked = inputs._replace(observation={"x": x, "action_mask": np.ones_like(mask)})
    key = "logits" if kind == "discrete" else "multi_logits"
    with tf.GradientTape() as tape:
        target = target_net.unroll(inputs).policy
        log_prob, log_rho, entropy = policy_terms(
            target_net, target, behaviour_net.unroll(inputs).policy, actions
        )
        total = tf.reduce_sum(log_prob) + tf.reduce_sum(entropy)
    raw = target_net.unroll(unmasked).policy[key].numpy()
    raw_behaviour = behaviour_net.unroll(unmasked).policy[key].numpy()
    ref_lp, ref_entropy = _reference(raw, mask, actions, blocks)
    ref_behaviour_lp, _ = _reference(raw_behaviour, mask, actions, blocks)
    np.testing.assert_allclose(log_prob, ref_lp, atol=2e-5)
    np.testing.assert_allclose(log_rho, ref_lp - ref_behaviour_lp, atol=2e-5)
    np.testing.assert_allclose(entropy, ref_entropy, atol=2e-5)
    assert np.mean(np.abs(log_rho) > 1e-3) > 0.5  # the networks differ: ratios are exercised
    # Masked logits are the constant, finite and out of the gradient's way.
    logits = target[key].numpy()
    np.testing.assert_array_equal(logits[mask == 0], MASKED_LOGIT)
    np.testing.assert_array_equal(logits[mask > 0], raw[mask > 0])
    grads = tape.gradient(total, target_net.trainable_variables)
    assert all(np.all(np.isfinite(g)) for g in grads if g is not None)
    # The tfp distribution (MultiDiscrete's path, the exports') agrees.
    dist = target_net.distribution({k: v for k, v in target.items()})
    np.testing.assert_allclose(dist.log_prob(actions), ref_lp, atol=2e-5)
    np.testing.assert_allclose(dist.entropy(), ref_entropy, atol=2e-5)


def test_an_all_but_one_masked_row_has_zero_entropy_and_no_nan(rng):
    net = make_network(NET, _space(6), gym.spaces.Discrete(6))
    mask = np.zeros((2, 3, 6), np.int8)
    mask[..., 4] = 1
    obs = {"x": rng.uniform(-1, 1, (2, 3, 3)).astype(np.float32), "action_mask": mask}
    inputs = NetInputs(obs, np.zeros((2, 3), bool), tf.zeros((2, 3), tf.int32),
                       np.zeros((2, 3), np.float32))  # fmt: skip
    policy = net.unroll(inputs).policy
    log_prob, _, entropy = policy_terms(net, policy, policy, np.full((2, 3), 4, np.int32))
    np.testing.assert_array_equal(entropy, 0.0)
    np.testing.assert_allclose(log_prob, 0.0, atol=1e-6)


@pytest.mark.parametrize("kind", ["discrete", "multi_discrete"])
def test_sampled_and_greedy_actions_are_never_masked(rng, kind):
    blocks = [6] if kind == "discrete" else list(NVEC)
    action_space = gym.spaces.Discrete(6) if kind == "discrete" else gym.spaces.MultiDiscrete(NVEC)
    net = make_network(NET, _space(sum(blocks)), action_space)
    n = 10_000
    mask = _masks(rng, (n,), blocks)
    obs = {"x": rng.uniform(-1, 1, (n, 3)).astype(np.float32), "action_mask": mask}
    prev = np.zeros((n, *action_space.shape), np.int32)
    for greedy in (False, True):
        policy = make_policy(net, "auto", greedy=greedy, seed=1)
        assert isinstance(policy, TFPolicy)  # a Dict observation acts through TF
        action, _, _ = policy.step(obs, np.ones(n, bool), prev, np.zeros(n, np.float32), ())
        action = action.reshape(n, -1)
        offsets = np.cumsum([0, *blocks[:-1]])
        chosen = mask[np.arange(n)[:, None], offsets + action]
        assert chosen.all(), f"greedy={greedy}: {int((chosen == 0).sum())} masked actions"


def test_sampling_follows_the_renormalised_distribution(rng):
    net = make_network(NET, _space(6), gym.spaces.Discrete(6))
    n = 20_000
    mask = np.tile(np.array([1, 0, 1, 1, 0, 1], np.int8), (n, 1))
    x = np.tile(rng.uniform(-1, 1, (1, 3)).astype(np.float32), (n, 1))
    obs = {"x": x, "action_mask": mask}
    action, params, _ = make_policy(net, seed=2).step(
        obs, np.ones(n, bool), np.zeros(n, np.int32), np.zeros(n, np.float32), ()
    )
    one = {"x": x[:1], "action_mask": np.ones((1, 6), np.int8)}
    out = net(NetInputs(one, np.ones(1, bool), np.zeros(1, np.int32), np.zeros(1, np.float32)))
    raw = out.policy["logits"].numpy()[0]
    p = np.exp(raw - raw.max()) * mask[0]
    p /= p.sum()
    freq = np.bincount(action, minlength=6) / n
    np.testing.assert_allclose(freq, p, atol=0.015)
    assert p.max() - p[p > 0].min() > 0.05  # the logits are not uniform: the law is tested


def test_the_mask_is_no_torso_feature(rng):
    net = make_network(NetworkConfig(hidden_sizes=(16,), value_hidden_sizes=(8,)), _space(6),
                       gym.spaces.Discrete(6))  # fmt: skip
    x = rng.uniform(-1, 1, (4, 3)).astype(np.float32)
    outs, masks = [], _masks(rng, (2, 4), [6])
    for mask in masks:
        inputs = NetInputs({"x": x, "action_mask": mask}, np.ones(4, bool), np.zeros(4, np.int32),
                           np.zeros(4, np.float32))  # fmt: skip
        outs.append(net(inputs))
    np.testing.assert_array_equal(outs[0].value, outs[1].value)
    both = (masks[0] > 0) & (masks[1] > 0)  # where both masks allow, the logits agree
    assert both.any()
    logits = [o.policy["logits"].numpy() for o in outs]
    np.testing.assert_array_equal(logits[0][both], logits[1][both])
    assert net.torso.weights[0].shape[0] == 3  # the torso reads x only


@pytest.mark.parametrize(
    ("observation", "action", "message"),
    [
        (_space(5), gym.spaces.Discrete(6), "expected shape (6,)"),
        (_space(6), gym.spaces.MultiDiscrete(NVEC), "expected shape (9,)"),
        (_space(2), gym.spaces.Box(-1, 1, (2,)), "take Discrete or MultiDiscrete actions"),
        (_space(3), gym.spaces.MultiBinary(3), "take Discrete or MultiDiscrete actions"),
        (_space(6, gym.spaces.Discrete(6)), gym.spaces.Discrete(6), "expected MultiBinary or Box"),
        (gym.spaces.Dict({"action_mask": gym.spaces.MultiBinary(6)}), gym.spaces.Discrete(6),
         "nothing to observe"),
    ],
)  # fmt: skip
def test_masks_that_do_not_fit_are_one_line_errors(observation, action, message):
    with pytest.raises(ValueError) as e:
        make_network(NET, observation, action)
    assert str(e.value).startswith("observation_space") and message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_box_mask_works_as_a_multibinary_one(rng):
    box = _space(6, gym.spaces.Box(0.0, 1.0, (6,), np.float32))
    net = make_network(NET, box, gym.spaces.Discrete(6))
    mask = _masks(rng, (50,), [6]).astype(np.float32)
    obs = {"x": rng.uniform(-1, 1, (50, 3)).astype(np.float32), "action_mask": mask}
    action, _, _ = make_policy(net, greedy=True).step(
        obs, np.ones(50, bool), np.zeros(50, np.int32), np.zeros(50, np.float32), ()
    )
    assert mask[np.arange(50), action].all()


def test_first_all_masked_names_the_row_and_the_block():
    mask = np.ones((4, 9), np.int8)
    assert first_all_masked(mask, [9]) is None
    mask[2, 3:5] = 0  # block 1 of (3, 2, 4)
    assert first_all_masked(mask, list(NVEC)) == (2, 1)
    assert first_all_masked(mask, [9]) is None
    assert first_all_masked(mask, list(NVEC), skip=np.array([0, 0, 1, 0], bool)) is None
    mask[1] = 0
    assert first_all_masked(mask, [9]) == (1, 0)
