"""TAAC's two-stage act-or-repeat step, shared by rollout, evaluation and the export.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. One step, batched over N environments, with state
``(tau [N, k, A], repeats [N] int32)``:

1. where ``first``: ``tau <- 0`` (or uniform in [-1, 1] with ``randomize_first_state_tau``),
   ``repeats <- 0``;
2. the actor samples ``x ~ pi(. | s, tau)``; ``tau^- = follow(tau)``,
   ``tau_hat = from_action(x, tau)``;
3. ``b ~ softmax([Q(s, tau^-), Q(s, tau_hat)] / alpha_b)``; before training starts
   ``b ~ U{0, 1}`` and ``x ~ U[-1, 1]^A`` instead;
4. switch where ``b = 1`` or ``repeats >= max_repeat_steps``; ``tau' = tau_hat`` there,
   else ``tau^-``; ``repeats' = (0 if switched else repeats) + 1``; the action is ``tau'[:, 0]``.

Greedy (evaluation) mode takes the mode of each stage (``tanh(loc)``, ``argmax b``) except
with probability ``epsilon`` per stage, where it samples. The outputs hold both the effective
switch ``b`` (a forced switch counts; what the exported policies report) and ``sampled_b``
(the b drawn before step 4): ALF's rollout stores the sampled b, so by default the
compare-through return does not cut at a forced switch (``TaacConfig.forced_switch_cuts``
stores ``b`` instead, see :mod:`~tfagents_vtrace.agents.taac.rollout`).
:func:`act_from_noise` is the same step with its draws as inputs (no random op): the step
that the exported LiteRT and ONNX policies carry.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents.taac.loss import beta_logits, critic_value
from tfagents_vtrace.agents.taac.networks import squashed_sample
from tfagents_vtrace.agents.taac.trajectories import Trajectory

__all__ = ["TaacPolicy", "act_from_noise", "act_step"]


def _critic_value(critics, observation, tau, reward_weights) -> tf.Tensor:
    """``Q(s, tau)`` [N]: the replica minimum per reward dim, weighted (loss.critic_value)."""
    q = critics(observation, tau)
    q = tf.reshape(q, [tf.shape(q)[0], -1, len(reward_weights)])
    return critic_value(q, reward_weights)


def act_step(
    actor,
    critics,
    trajectory: Trajectory,
    observation: tf.Tensor,
    first: tf.Tensor,
    tau: tf.Tensor,
    repeats: tf.Tensor,
    seed: tf.Tensor,
    *,
    alpha_b: tf.Tensor,
    greedy: bool,
    epsilon: float = 0.0,
    random_phase: tf.Tensor | bool = False,
    max_repeat_steps: int | None = None,
    randomize_first: bool = False,
    clipping: tuple[float, float] | None = None,
    reward_weights: tuple[float, ...] = (1.0,),
) -> dict[str, tf.Tensor]:
    """One two-stage step (module docstring). ``seed`` [2] int seeds the stateless draws.

    Returns a dict of ``action`` [N, A] in [-1, 1], ``tau`` [N, k, A] (new), ``prev_tau``
    [N, k, A] (after the episode-start reset), ``repeats`` [N] int32 (new), ``b`` [N] int32
    (effective switch), ``sampled_b`` [N] int32 (the b drawn, before a forced switch: ALF's
    stored rollout b), ``p_b1`` [N] (probability of b = 1) and ``value`` [N], the state value
    ``beta_0 Q(s, tau^-) + beta_1 Q(s, tau_hat)`` (``Q`` the critics' replica minimum,
    weighted by ``reward_weights`` over reward dims, ``tau_hat`` from this step's candidate
    action): the quantity the critic targets bootstrap from. No gradients are needed.
    """
    n = tf.shape(observation)[0]
    a_dim = actor.action_dim
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 7)
    if randomize_first:
        start = trajectory.random(n, a_dim, seed=seeds[0])
    else:
        start = trajectory.zeros(n, a_dim)
    tau, repeats = _episode_start(first, tau, repeats, start)

    loc, log_std = actor(observation, tau)
    noise = tf.random.stateless_normal(tf.shape(loc), seeds[1])
    x = squashed_sample(loc, log_std, noise)
    if greedy:
        explore = tf.random.stateless_uniform([n, 1], seeds[2]) < epsilon
        x = tf.where(explore, x, tf.tanh(loc))
    x = tf.where(random_phase, tf.random.stateless_uniform(tf.shape(loc), seeds[3], -1.0, 1.0), x)
    stage = _candidates(critics, trajectory, observation, tau, x, alpha_b, clipping, reward_weights)
    sampled_b = tf.cast(tf.random.stateless_uniform([n], seeds[4]) < stage["p_b1"], tf.int32)
    b = sampled_b
    if greedy:
        explore = tf.random.stateless_uniform([n], seeds[5]) < epsilon
        b = tf.where(explore, sampled_b, tf.argmax(stage["logits"], axis=-1, output_type=tf.int32))
    coin = tf.cast(tf.random.stateless_uniform([n], seeds[6]) < 0.5, tf.int32)
    b = tf.where(random_phase, coin, b)
    return _commit(trajectory, tau, repeats, b, stage, max_repeat_steps)


def act_from_noise(
    actor,
    critics,
    trajectory: Trajectory,
    observation: tf.Tensor,
    first: tf.Tensor,
    tau: tf.Tensor,
    repeats: tf.Tensor,
    *,
    alpha_b: tf.Tensor,
    noise: tf.Tensor | None = None,
    b_noise: tf.Tensor | None = None,
    max_repeat_steps: int | None = None,
    clipping: tuple[float, float] | None = None,
    reward_weights: tuple[float, ...] = (1.0,),
) -> dict[str, tf.Tensor]:
    """:func:`act_step` with its draws as inputs, in plain TF ops (no random op): the step
    of the portable (LiteRT, ONNX) TAAC policies and of the SavedModel's ``action_from_noise``.

    ``noise`` [N, A] standard normal gives the actor's sample
    ``x = tanh(loc + exp(log_std) * noise)`` and ``b_noise`` [N] uniform in [0, 1) the
    act-or-repeat choice ``b = 1`` iff ``b_noise < p_b1``: the draws of :func:`act_step` with
    ``greedy=False``. Both None: the greedy step, the mode of each stage (``x = tanh(loc)``,
    ``b = argmax``), i.e. :func:`act_step` with ``greedy=True, epsilon=0``. Episodes start
    from the zero trajectory (``randomize_first=False``); no random phase. Returns the dict
    of :func:`act_step`.

    Raises:
      ValueError: only one of ``noise`` and ``b_noise`` is given.
    """
    if (noise is None) != (b_noise is None):
        raise ValueError("noise, b_noise: give both (a sampled step) or neither (greedy)")
    start = tf.zeros_like(tf.cast(tau, tf.float32))
    tau, repeats = _episode_start(first, tau, repeats, start)
    loc, log_std = actor(observation, tau)
    x = tf.tanh(loc) if noise is None else squashed_sample(loc, log_std, noise)
    stage = _candidates(critics, trajectory, observation, tau, x, alpha_b, clipping, reward_weights)
    if b_noise is None:
        b = tf.argmax(stage["logits"], axis=-1, output_type=tf.int32)
    else:
        b = tf.cast(b_noise < stage["p_b1"], tf.int32)
    return _commit(trajectory, tau, repeats, b, stage, max_repeat_steps)


def _episode_start(first, tau, repeats, start) -> tuple[tf.Tensor, tf.Tensor]:
    """Step 1: ``tau <- start`` and ``repeats <- 0`` where ``first``."""
    first = tf.cast(first, tf.bool)
    tau = tf.where(first[:, None, None], start, tf.cast(tau, tf.float32))
    repeats = tf.where(first, tf.zeros_like(repeats), tf.cast(repeats, tf.int32))
    return tau, repeats


def _candidates(critics, trajectory, observation, tau, x, alpha_b, clipping, weights) -> dict:
    """Steps 2-3 given the candidate action ``x``: both trajectories, their critic values
    (replica minimum, weighted over reward dims), the b logits and ``p_b1``."""
    follow = trajectory.follow(tau)
    fresh = trajectory.from_action(x, tau)
    q_follow = _critic_value(critics, observation, follow, weights)
    q_fresh = _critic_value(critics, observation, fresh, weights)
    logits = beta_logits(q_follow, q_fresh, alpha_b, clipping)
    p_b1 = tf.nn.softmax(logits)[:, 1]
    return dict(follow=follow, fresh=fresh, q_follow=q_follow, q_fresh=q_fresh, logits=logits,
                p_b1=p_b1)  # fmt: skip


def _commit(trajectory, tau, repeats, b, stage, max_repeat_steps) -> dict:
    """Step 4: switch where ``b`` or the repeat limit; the outputs of :func:`act_step`."""
    switch = b > 0
    if max_repeat_steps is not None:
        switch = tf.logical_or(switch, repeats >= max_repeat_steps)
    new_tau = tf.where(switch[:, None, None], stage["fresh"], stage["follow"])
    new_repeats = tf.where(switch, tf.zeros_like(repeats), repeats) + 1
    p_b1 = stage["p_b1"]
    return {
        "action": trajectory.action(new_tau),
        "tau": new_tau,
        "prev_tau": tau,
        "repeats": new_repeats,
        "b": tf.cast(switch, tf.int32),
        "sampled_b": tf.cast(b, tf.int32),
        "p_b1": p_b1,
        "value": (1.0 - p_b1) * stage["q_follow"] + p_b1 * stage["q_fresh"],
    }


class TaacPolicy:
    """Compiled in-process acting policy over a batch of environments (numpy in and out).

    The state is ``(tau [N, k, A], repeats [N])`` numpy arrays. ``step`` follows the
    Evaluator's interface: ``step(obs, first, prev_action, prev_reward, state) ->
    (env_action, info, new_state)`` where ``env_action`` is scaled from [-1, 1] to the
    environment's ``[low, high]`` and ``info`` holds the entries of :func:`act_step`.

    Args:
      learner: a :class:`~tfagents_vtrace.agents.taac.learner.TaacLearner` (its networks
        and b temperature are read live, so no weight copies are needed).
      greedy: evaluation mode (epsilon-greedy per stage) instead of sampling.
      action_low, action_high: the environment's action bounds ``[A]``.
      seed: seeds the stateless draws (the same seed gives the same actions).
    """

    def __init__(self, learner, greedy: bool, action_low, action_high, seed: int = 0):
        self.learner = learner
        cfg = learner.config
        self.greedy = greedy
        self.low = np.asarray(action_low, np.float32)
        self.high = np.asarray(action_high, np.float32)
        self._seed, self._calls = int(seed), 0
        self._kw = dict(
            greedy=greedy,
            epsilon=cfg.epsilon_greedy if greedy else 0.0,
            max_repeat_steps=cfg.max_repeat_steps,
            randomize_first=cfg.randomize_first_state_tau,
            clipping=cfg.b1_advantage_clipping,
            reward_weights=learner.reward_weights,
        )
        self._step = tf.function(self._tf_step, jit_compile=cfg.jit_compile, autograph=False)

    def _tf_step(self, obs, first, tau, repeats, seed, random_phase):
        learner = self.learner
        return act_step(
            learner.actor,
            learner.critics,
            learner.trajectory,
            obs,
            first,
            tau,
            repeats,
            seed,
            alpha_b=tf.exp(learner.log_alpha_b),
            random_phase=random_phase,
            **self._kw,
        )

    def initial_state(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """Zero trajectories and repeat counts (``first`` resets them anyway)."""
        k, a = self.learner.trajectory.order, self.learner.action_dim
        return np.zeros([batch_size, k, a], np.float32), np.zeros([batch_size], np.int32)

    def set_weights(self, weights) -> None:
        """No-op: the policy reads the learner's variables directly."""
        del weights

    def to_env(self, action: np.ndarray) -> np.ndarray:
        """Scales ``[-1, 1]`` actions to the environment's bounds."""
        return self.low + (np.asarray(action) + 1.0) * 0.5 * (self.high - self.low)

    def step(self, obs, first, prev_action=None, prev_reward=None, state=None, random_phase=False):
        """One batched step; returns ``(env_action, info dict of numpy, (tau, repeats))``."""
        del prev_action, prev_reward
        self._calls += 1
        seed = np.array([self._seed, self._calls], np.int64)
        out = self._step(
            np.asarray(obs, np.float32),
            np.asarray(first, bool),
            state[0],
            state[1],
            seed,
            tf.constant(bool(random_phase)),
        )
        info = {k: v.numpy() for k, v in out.items()}
        return self.to_env(info["action"]), info, (info["tau"], info["repeats"])
