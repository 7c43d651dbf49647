"""TAAC's ALF options (issue #16) against slow numpy written in ALF's notation
(https://github.com/HorizonRobotics/alf/blob/pytorch/alf/algorithms/taac_algorithm.py:
``TAACTDLoss``, ``_discounted_return``, ``_predict_action``, ``_compute_critics``,
``_calc_critic_loss``, ``_set_target_entropy``, ``train_step``; Yu et al., "TAAC: Temporally
Abstract Actor-Critic for Continuous Control", 2021, https://arxiv.org/abs/2104.06521).

The numpy functions below are named after the reference's functions and follow them line
by line; the networks' outputs are the only thing they take from this package.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import tensorflow as tf

from tests.agents.test_taac_math import (
    _FixedActor,
    _np_follow,
    _np_from_action,
    np_discounted_return,
)
from tests.modes import RUN_MODES, run_in_mode
from tfagents_vtrace.agents.taac import loss as taac_loss
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.learner import TaacLearner
from tfagents_vtrace.agents.taac.policy import act_from_noise, act_step
from tfagents_vtrace.agents.taac.rollout import Rollout, replay_specs
from tfagents_vtrace.agents.taac.trajectories import Trajectory
from tfagents_vtrace.replay.sequence import SequenceReplay

# --- ALF's TAACTDLoss, in numpy --------------------------------------------------------


def alf_element_wise_squared_loss(x, y):
    return (x - y) ** 2


def alf_element_wise_huber_loss(x, y):
    """``F.smooth_l1_loss(y, x, reduction="none")`` (beta 1)."""
    d = np.abs(y - x)
    return np.where(d < 1.0, 0.5 * d**2, d - 0.5)


alf_discounted_return = np_discounted_return


def alf_taac_td_loss(info, value, target_value, gamma, td_error_loss_fn):
    """``TAACTDLoss.forward``: the per-step loss ``[T, B]`` (zero at the last step)."""
    train_b = info["b"]
    if info["reward"].ndim == 3:
        discounts = info["discount"][..., None] * gamma
    else:
        discounts = info["discount"] * gamma
    b = (info["rollout_b"] | train_b).astype(bool)
    b[0, :] = False
    is_lasts = info["step_is_last"] | b
    returns = alf_discounted_return(info["reward"], target_value, is_lasts, discounts)
    loss = td_error_loss_fn(returns, value[:-1])
    loss = np.concatenate([loss, np.zeros_like(loss[:1])])  # tensor_extend_zero
    if loss.ndim == 3:
        loss = loss.mean(axis=-1)
    return loss, returns


def alf_calc_critic_loss(info, critics, target_critic, gamma, td_error_loss_fn):
    """``_calc_critic_loss``: the replicas' per-step losses summed, then ALF's mean over
    the ``[T, B]`` window."""
    losses = [
        alf_taac_td_loss(info, critics[:, :, i, ...], target_critic, gamma, td_error_loss_fn)[0]
        for i in range(critics.shape[2])
    ]
    return np.sum(losses, axis=0).mean()


def _td_inputs(rng, t_len, batch, d=None):
    tail = () if d is None else (d,)
    info = {
        "reward": rng.normal(size=(t_len, batch, *tail)),
        "discount": (rng.random((t_len, batch)) > 0.15).astype(np.float64),
        "step_is_last": rng.random((t_len, batch)) < 0.2,
        "rollout_b": rng.random((t_len, batch)) < 0.3,
        "b": rng.random((t_len, batch)) < 0.3,
    }
    info["step_is_last"][3, 0] = True  # an episode boundary inside a trace
    target = rng.normal(size=(t_len, batch, *tail))
    return info, target


LOSSES = {"squared": alf_element_wise_squared_loss, "huber": alf_element_wise_huber_loss}


@pytest.mark.parametrize("mode", RUN_MODES)
@pytest.mark.parametrize("td_loss", ["squared", "huber"])
@pytest.mark.parametrize("reward_dim", [None, 3])
def test_critic_loss_is_alf_taac_td_loss(mode, td_loss, reward_dim, rng):
    """Issues 2 and 3: no LAST mask (ALF), squared or Huber, R replicas, D reward dims with
    one gamma per dim; ``mask_last_steps`` keeps the earlier masked mean as an option."""
    t_len, batch, replicas = 7, 5, 3
    info, target = _td_inputs(rng, t_len, batch, reward_dim)
    gamma = 0.9 if reward_dim is None else np.array([0.9, 0.5, 1.0])
    tail = () if reward_dim is None else (reward_dim,)
    critics = rng.normal(size=(t_len, batch, replicas, *tail)) * 2.0  # |errors| above 1 too
    discounts = (
        info["discount"] * gamma if reward_dim is None else info["discount"][..., None] * gamma
    )

    def ours(mask_last_steps):
        fn = run_in_mode(
            lambda *a: tuple(
                taac_loss.critic_loss(*a, td_loss=td_loss, mask_last_steps=mask_last_steps)
            ),
            mode,
        )
        return fn(
            critics.astype(np.float32), info["reward"].astype(np.float32),
            discounts.astype(np.float32), target.astype(np.float32), info["step_is_last"],
            info["rollout_b"], info["b"],
        )  # fmt: skip

    loss, returns, _ = ours(False)
    want = alf_calc_critic_loss(info, critics, target, gamma, LOSSES[td_loss])
    _, want_returns = alf_taac_td_loss(info, critics[:, :, 0], target, gamma, LOSSES[td_loss])
    np.testing.assert_allclose(returns.numpy(), want_returns, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(float(loss), want, rtol=1e-5)
    # The option: the same per-step loss averaged over the steps that do not end an episode.
    loss_masked, _, mask = ours(True)
    per_step = sum(
        alf_taac_td_loss(info, critics[:, :, i], target, gamma, LOSSES[td_loss])[0]
        for i in range(replicas)
    )[:-1]
    keep = ~info["step_is_last"][:-1]
    np.testing.assert_array_equal(mask.numpy(), keep)
    np.testing.assert_allclose(float(loss_masked), per_step[keep].mean(), rtol=1e-5)
    assert abs(float(loss_masked) - float(loss)) > 1e-3  # the two reductions differ here


def test_td_loss_callable():
    """The Python API takes ALF's ``td_error_loss_fn`` as a callable."""
    out = taac_loss.critic_loss(
        tf.zeros([3, 1, 2]), [[0.0], [1.0], [2.0]], tf.ones([3, 1]), tf.zeros([3, 1]),
        tf.zeros([3, 1], tf.bool), tf.zeros([3, 1], tf.bool), tf.zeros([3, 1], tf.bool),
        td_loss=lambda target, value: tf.abs(target - value),
    )  # fmt: skip
    # returns [1 + 2, 2] (no cut, gamma 1); |G - 0| per replica, 2 replicas, mean over 3 x 1
    np.testing.assert_allclose(float(out.loss), 2 * (3.0 + 2.0) / 3.0, rtol=1e-6)


# --- Issue 1: the stored rollout b -----------------------------------------------------


class _LinearCritics:
    """Q_1 = Q_2 = w * a (the trajectory's action); twins equal up to +1."""

    def __call__(self, observation, tau):
        q = 3.0 * tau[:, 0, 0]
        return tf.stack([q, q + 1.0], axis=-1)


class _ToyVectorEnv:
    """Two environments with episodes of 6 and 9 steps (NEXT_STEP autoreset), observations
    ``sin(0.7 k + i)``, rewards ``0.1 k``."""

    num_envs = 2

    def __init__(self):
        import gymnasium as gym

        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.lengths, self.k = np.array([6, 9]), 0
        self.t, self.done = np.zeros(2, int), np.zeros(2, bool)

    def _obs(self):
        return np.sin(0.7 * self.k + np.arange(2))[:, None].astype(np.float32)

    def reset(self, seed=None):
        return self._obs(), {}

    def step(self, action):
        self.k += 1
        reward = np.where(self.done, 0.0, 0.1 * self.k)
        self.t = np.where(self.done, 0, self.t + 1)
        terminated = ~self.done & (self.t >= self.lengths)
        self.done = terminated
        return self._obs(), reward, terminated, np.zeros(2, bool), {}


class _NoisePolicy:
    """The acting step of the exported policies (``act_from_noise``) with recorded draws."""

    def __init__(self, noises, b_noises, max_repeat_steps):
        self.noises, self.b_noises, self.calls = noises, b_noises, 0
        self.max_repeat_steps = max_repeat_steps

    def initial_state(self, n):
        return np.zeros((n, 1, 1), np.float32), np.zeros(n, np.int32)

    def step(self, obs, first, prev_action, prev_reward, state, random_phase):
        out = act_from_noise(
            _FixedActor(), _LinearCritics(), Trajectory("constant"), obs, first, *state,
            alpha_b=0.5, noise=self.noises[self.calls], b_noise=self.b_noises[self.calls],
            max_repeat_steps=self.max_repeat_steps,
        )  # fmt: skip
        self.calls += 1
        info = {k: v.numpy() for k, v in out.items()}
        return info["action"], info, (info["tau"], info["repeats"])


def alf_rollout_b(observations, firsts, noises, b_noises, max_repeat_steps, alpha=0.5):
    """ALF's ``rollout_step`` / ``_predict_action`` (Mode.rollout) of a constant trajectory
    with the stub actor and critics: returns the stored ``info.b`` (the sampled ``ap_out.b``)
    and the effective switch ``condition`` per step, ``[T, N]``."""
    n = observations.shape[1]
    tau_a, repeats = np.zeros(n), np.zeros(n, int)
    stored, condition_all = [], []
    for obs, first, noise, b_noise in zip(observations, firsts, noises, b_noises, strict=True):
        tau_a = np.where(first, 0.0, tau_a)  # the state is reset at FIRST
        repeats = np.where(first, 0, repeats)
        b1_a = np.tanh(obs[:, 0] + np.exp(-3.0) * noise[:, 0])  # rsample of pi(. | s, tau)
        b0_tau, b1_tau = tau_a, b1_a  # _update_tau, _action2tau (constant)
        q_0, q_1 = 3.0 * b0_tau, 3.0 * b1_tau  # _compute_critics: min over the replicas
        logits = np.stack([q_0, q_1], -1) / alpha
        probs = np.exp(logits - logits.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        b = (b_noise < probs[:, 1]).astype(int)  # sample_action_distribution(beta_dist)
        condition = b.astype(bool) | (repeats >= max_repeat_steps)
        tau_a = np.where(condition, b1_tau, b0_tau)
        repeats = np.where(condition, 0, repeats) + 1
        stored.append(b)  # TaacInfo(b=ap_out.b)
        condition_all.append(condition.astype(int))
    return np.array(stored), np.array(condition_all)


@pytest.mark.parametrize("forced_switch_cuts", [False, True])
def test_rollout_stores_alf_sampled_b_and_targets_cut_there(forced_switch_cuts):
    """Issue 1: the replay's ``b`` is ALF's sampled b (a ``max_repeat_steps`` forced switch
    is no cut), and the compare-through targets computed from the replay are ALF's;
    ``forced_switch_cuts`` stores (and cuts at) the effective switch instead."""
    steps, max_repeat = 40, 2
    rng = np.random.default_rng(4)
    noises = rng.normal(size=(steps, 2, 1)).astype(np.float32)
    b_noises = rng.uniform(size=(steps, 2)).astype(np.float32)
    env = _ToyVectorEnv()
    policy = _NoisePolicy(noises, b_noises, max_repeat)
    replay = SequenceReplay(replay_specs((1,), 1, 1), 2, 2 * steps)
    rollout = Rollout(env, policy, replay, seed=0, forced_switch_cuts=forced_switch_cuts)
    for _ in range(steps):
        rollout.step(random_phase=False)
    data = {k: np.swapaxes(v, 0, 1) for k, v in replay.data.items()}  # [T, N]
    firsts = np.concatenate([np.ones((1, 2), bool), data["is_last"][:-1]])
    sampled, effective = alf_rollout_b(data["observation"], firsts, noises, b_noises, max_repeat)
    want_b = effective if forced_switch_cuts else sampled
    np.testing.assert_array_equal(data["b"], want_b)
    assert (effective > sampled).sum() >= 3  # forced switches happened

    # The critic targets of the stored window against TAACTDLoss with ALF's info.b.
    train_b = rng.random((steps, 2)) < 0.2
    target = rng.normal(size=(steps, 2))
    out = taac_loss.critic_loss(
        tf.zeros([steps, 2, 2]), data["reward"], 0.9 * data["discount"], target.astype(np.float32),
        data["is_last"], data["b"], train_b,
    )  # fmt: skip
    info = {"reward": data["reward"].astype(np.float64), "discount": data["discount"],
            "step_is_last": data["is_last"], "rollout_b": sampled.astype(bool),
            "b": train_b}  # fmt: skip
    _, alf_returns = alf_taac_td_loss(info, np.zeros((steps, 2)), target, 0.9, LOSSES["squared"])
    info_forced = {**info, "rollout_b": effective.astype(bool)}
    _, forced_returns = alf_taac_td_loss(info_forced, np.zeros((steps, 2)), target, 0.9,
                                         LOSSES["squared"])  # fmt: skip
    assert np.abs(forced_returns - alf_returns).max() > 1e-3  # the cuts differ
    want = forced_returns if forced_switch_cuts else alf_returns
    np.testing.assert_allclose(out.returns.numpy(), want, rtol=1e-5, atol=1e-5)


def test_act_step_reports_sampled_and_forced_switches():
    """``act_step`` (training rollouts) gives both: ``b`` with the forced switch,
    ``sampled_b`` without it."""
    n = 64
    out = act_step(
        _FixedActor(), _LinearCritics(), Trajectory("constant"), tf.fill([n, 1], -0.5),
        tf.zeros([n], tf.bool), tf.fill([n, 1, 1], 0.9), tf.fill([n], 3), tf.constant([1, 2]),
        alpha_b=0.5, greedy=False, max_repeat_steps=3,
    )  # fmt: skip
    # Q(s, tau_hat) = 3 tanh(-.5) << Q(s, tau^-) = 2.7: b is almost never sampled.
    assert out["sampled_b"].numpy().sum() <= 1 and out["b"].numpy().all()


# --- Issue 3: replicas, multi-dim reward, target entropies: ALF's train_step -----------


def alf_compute_critics(critics, num_replicas, reward_weights, reward_dim, replica_min=True,
                        apply_reward_weights=True):  # fmt: skip
    """``_compute_critics`` on the network output ``[B, replicas * reward_dim]``."""
    shape = () if reward_dim == 1 else (reward_dim,)
    critics = critics.reshape(-1, num_replicas, *shape)
    multidim = reward_dim > 1
    if replica_min:
        if multidim:
            sign = np.sign(reward_weights)
            critics = (critics * sign).min(axis=1) * sign
        else:
            critics = critics.min(axis=1)
    if apply_reward_weights and multidim:
        critics = (critics * reward_weights).sum(axis=-1)
    return critics


def alf_calc_default_target_entropy(spec, min_prob=0.1):
    """ALF's default: continuous ``sum log((M - m) min_prob)``; discrete, ``1 - min_prob``
    on one value and ``min_prob`` spread over the others."""
    if spec["continuous"]:
        return sum(math.log((hi - lo) * min_prob) for lo, hi in spec["bounds"])
    n = spec["bounds"][0][1] - spec["bounds"][0][0] + 1
    return -(1 - min_prob) * math.log(1 - min_prob) - min_prob * math.log(min_prob / (n - 1))


def alf_set_target_entropy(target_entropy, spec, call_spec):
    """``_set_target_entropy(name, t, [spec])``."""
    if target_entropy is None or callable(target_entropy):
        if target_entropy is None:
            return alf_calc_default_target_entropy(spec)
        return float(np.sum([target_entropy(call_spec)]))
    return target_entropy


def alf_target_entropies(target_entropy, action_dim, b_call_spec, a_call_spec):
    if not isinstance(target_entropy, tuple):
        target_entropy = (target_entropy,) * 2
    specs = ({"continuous": False, "bounds": [(0, 1)]},
             {"continuous": True, "bounds": [(-1.0, 1.0)] * action_dim})  # fmt: skip
    calls = (b_call_spec, a_call_spec)
    return tuple(alf_set_target_entropy(t, s, c) for t, s, c in zip(target_entropy, specs, calls))


CASES = {
    "replicas3": dict(trajectory="constant", num_critic_replicas=3, target_entropy=(0.2,)),
    "multidim": dict(
        trajectory="linear",
        num_critic_replicas=2,
        reward_dim=3,
        reward_weights=(1.0, -0.5, 0.0),
        reward_discounts=(0.9, 0.5, 1.0),
        td_loss="huber",
        b1_advantage_clipping=(-0.3, 0.3),
        target_entropy=(None, lambda spec: -0.5 * spec.shape[0]),
    ),
    "multidim_sum": dict(trajectory="quadratic", reward_dim=2, mask_last_steps=True),
}


@pytest.mark.parametrize("case", list(CASES))
def test_learner_losses_are_alf_train_step(case, rng):
    """One update's critic loss, alpha loss, beta_1 and advantage against ALF's
    ``train_step`` + ``calc_loss`` in numpy, given the networks and the update's draws."""
    kw = dict(CASES[case])
    cfg = TaacConfig(actor_hidden_sizes=(16,), critic_hidden_sizes=(16,), jit_compile=False,
                     initial_alpha=0.7, **kw)  # fmt: skip
    learner = TaacLearner(cfg, (3,), 2, seed=0)
    learner.log_alpha_b.assign(np.log(0.05))  # both b values likely with untrained critics
    for v in learner.target_critics.trainable_variables:  # targets unlike the critics
        v.assign(v + 0.1 * rng.normal(size=v.shape))
    t_len, batch, k, a_dim, d = 5, 6, learner.trajectory.order, 2, cfg.reward_dim
    tail = () if d == 1 else (d,)
    batch_np = {
        "observation": rng.normal(size=(t_len, batch, 3)).astype(np.float32),
        "reward": rng.normal(size=(t_len, batch, *tail)).astype(np.float32),
        "discount": (rng.random((t_len, batch)) > 0.2).astype(np.float32),
        "is_last": rng.random((t_len, batch)) < 0.2,
        "prev_tau": rng.uniform(-1, 1, (t_len, batch, k, a_dim)).astype(np.float32),
        "tau": rng.uniform(-1, 1, (t_len, batch, k, a_dim)).astype(np.float32),
        "b": (rng.random((t_len, batch)) < 0.3).astype(np.int32),
    }
    n = t_len * batch
    noise = rng.normal(size=(n, a_dim)).astype(np.float32)
    b_uniform = rng.uniform(size=n).astype(np.float32)
    _, critic_loss, alpha_loss, metrics = learner.losses_from_noise(batch_np, noise, b_uniform)

    # ALF, step by step, on the flattened [T * B] steps.
    obs = batch_np["observation"].reshape(n, 3)
    prev_tau = batch_np["prev_tau"].reshape(n, k, a_dim)
    loc, log_std = (x.numpy().astype(np.float64) for x in learner.actor(obs, prev_tau))
    u = loc + np.exp(log_std) * noise
    b1_a = np.tanh(u)
    log_prob = (-0.5 * noise**2 - log_std - 0.5 * np.log(2 * np.pi)
                - np.log(1 - np.tanh(u) ** 2)).sum(-1)  # fmt: skip
    parts = [prev_tau[:, i].astype(np.float64) for i in range(k)] + [None] * (3 - k)
    kind, inverse = cfg.trajectory, cfg.inverse_mode
    if kind == "constant":
        b0_tau, b1_tau = prev_tau[:, :1], b1_a[:, None]
    else:
        b0_tau = np.stack(_np_follow(kind, *parts)[:k], 1)
        b1_tau = np.stack(_np_from_action(kind, inverse, b1_a, parts[0])[:k], 1)
    r, w = cfg.num_critic_replicas, np.array(cfg.reward_weights or (1.0,) * d)

    def net(critic_net, tau, **kw):
        out = critic_net(obs, tau.astype(np.float32)).numpy().astype(np.float64)
        return alf_compute_critics(out, r, w, d, **kw)

    q_values2 = np.stack([net(learner.critics, b0_tau), net(learner.critics, b1_tau)], -1)
    logits = q_values2.copy()
    if cfg.b1_advantage_clipping is not None:
        logits = logits - logits[..., :1]
        logits[..., 1] = np.clip(logits[..., 1], *cfg.b1_advantage_clipping)
    logits = logits / 0.05
    probs = np.exp(logits - logits.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    train_b = b_uniform < probs[:, 1]
    target_q = [net(learner.target_critics, tau, apply_reward_weights=False)
                for tau in (b0_tau, b1_tau)]  # fmt: skip
    beta_probs = probs[:, None, :] if d > 1 else probs
    target_critic = beta_probs[..., 0] * target_q[0] + beta_probs[..., 1] * target_q[1]
    critics = net(learner.critics, batch_np["tau"].reshape(n, k, a_dim), replica_min=False,
                  apply_reward_weights=False)  # fmt: skip
    tb = lambda x: x.reshape(t_len, batch, *x.shape[1:])  # noqa: E731
    info = {"reward": batch_np["reward"].astype(np.float64), "discount": batch_np["discount"],
            "step_is_last": batch_np["is_last"], "rollout_b": batch_np["b"].astype(bool),
            "b": tb(train_b)}  # fmt: skip
    gamma = np.array(cfg.reward_discounts) if cfg.reward_discounts else cfg.discount
    td_fn = LOSSES[cfg.td_loss]
    if cfg.mask_last_steps:  # the option: the mean over the steps that do not end an episode
        per_step = sum(alf_taac_td_loss(info, tb(critics)[:, :, i], tb(target_critic), gamma,
                                        td_fn)[0] for i in range(r))[:-1]  # fmt: skip
        want_critic = per_step[~batch_np["is_last"][:-1]].mean()
    else:
        want_critic = alf_calc_critic_loss(info, tb(critics), tb(target_critic), gamma, td_fn)
    beta_entropy = -(probs * np.log(probs)).sum(-1)
    alf_arg = kw.get("target_entropy")  # ALF's argument: a flag's single value is a number
    alf_arg = alf_arg[0] if isinstance(alf_arg, tuple) and len(alf_arg) == 1 else alf_arg
    target_b, target_a = alf_target_entropies(
        alf_arg, a_dim, SimpleNamespace(shape=()), SimpleNamespace(shape=(a_dim,))
    )
    want_alpha = np.mean(
        np.log(0.7) * (-log_prob - target_a) + np.log(0.05) * (beta_entropy - target_b)
    )
    np.testing.assert_allclose(float(metrics["p_b1"]), probs[:, 1].mean(), rtol=1e-5)
    adv = q_values2[:, 1] - q_values2[:, 0]
    np.testing.assert_allclose(float(metrics["advantage"]), adv.mean(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(float(critic_loss), want_critic, rtol=1e-4)
    np.testing.assert_allclose(float(alpha_loss), want_alpha, rtol=1e-4, atol=1e-6)
    assert (learner.target_beta_entropy, learner.target_action_entropy) == pytest.approx(
        (target_b, target_a)
    )
