"""TAAC's learner: actor, critic replicas, target critics, two temperatures, one compiled
train call running several updates on replay windows.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521; ALF's ``TaacAlgorithmBase.train_step`` and ``calc_loss``
(https://github.com/HorizonRobotics/alf/blob/pytorch/alf/algorithms/taac_algorithm.py). For
every step of a ``[T, B]`` window (flattened to N): the
actor resamples ``x ~ pi(. | s, tau_prev)`` (reparameterized), the current policy's b is
drawn from the softmax over ``Q(s, tau^-)``, ``Q(s, tau_hat)`` (``Q``: the replica minimum,
weighted over reward dims); the critic replicas regress ``Q_i^d(s, tau_rollout)`` on the
compare-through return of each reward dim (cut where ``rollout_b | train_b`` or the episode
ends); the actor minimizes ``-beta_1 Q(s, tau_hat) + alpha_a log pi``; both log-temperatures
follow their target entropies. Each part has its own Adam optimizer. The options and their
defaults (ALF's unless stated) are described in :mod:`~tfagents_vtrace.agents.taac.config`.

Batch layout (time-major, ALF alignment: step t's reward/discount are those of arriving at
t): ``observation [T, B, ...]``, ``reward [T, B]`` (``[T, B, D]`` with ``reward_dim`` D > 1),
``discount [T, B]`` (``1 - terminated``),
``is_last [T, B]`` bool, ``prev_tau`` and ``tau [T, B, k, A]`` (the rollout trajectories
before and after acting), ``b [T, B]`` (rollout switch). ``train`` takes ``[K, T, B, ...]``
and runs K updates in one compiled call.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from tfagents_vtrace.agents.optimization import clip_and_check
from tfagents_vtrace.agents.taac import loss as taac_loss
from tfagents_vtrace.agents.taac.config import TaacConfig
from tfagents_vtrace.agents.taac.networks import (
    TaacActor,
    TaacCritics,
    squashed_log_prob,
    squashed_sample,
)
from tfagents_vtrace.agents.taac.trajectories import Trajectory

__all__ = ["BATCH_KEYS", "TaacLearner"]

BATCH_KEYS = ("observation", "reward", "discount", "is_last", "prev_tau", "tau", "b")
METRIC_KEYS = (
    "actor_loss",
    "critic_loss",
    "alpha_loss",
    "action_entropy",
    "beta_entropy",
    "p_b1",
    "q_rollout",
    "advantage",
    "actor_grad_norm",
    "critic_grad_norm",
    "skipped",
)


def _merge(x: tf.Tensor) -> tf.Tensor:
    """[T, B, ...] -> [T * B, ...]."""
    return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))


class TaacLearner:
    """Networks, optimizers and the compiled update of TAAC/TaacL/TaacQ.

    Args:
      config: a :class:`TaacConfig`.
      observation_shape: shape of one observation (flattened by the networks).
      action_dim: A, the size of the (continuous, [-1, 1]-scaled) action.
      seed: seeds the in-graph sampling of the updates.
    """

    def __init__(self, config: TaacConfig, observation_shape, action_dim: int, seed: int = 0):
        if not isinstance(config, TaacConfig):
            raise ValueError(f"config: expected a TaacConfig, received {type(config)}")
        self.config = config
        self.observation_shape = tuple(int(d) for d in observation_shape)
        self.action_dim = int(action_dim)
        self.trajectory = Trajectory(config.trajectory, config.inverse_mode)
        k = self.trajectory.order
        obs_dim = int(np.prod(self.observation_shape))
        self.actor = TaacActor(obs_dim, action_dim, k, config.actor_hidden_sizes, name="actor")
        self.reward_weights = config.resolved_reward_weights
        heads = config.num_critic_replicas * config.reward_dim
        self.critics = TaacCritics(config.critic_hidden_sizes, heads, name="critics")
        self.target_critics = TaacCritics(config.critic_hidden_sizes, heads, name="target_critics")
        obs = tf.zeros([1, *self.observation_shape])
        tau = tf.zeros([1, k, action_dim])
        self.actor(obs, tau)
        self.critics(obs, tau)
        self.target_critics(obs, tau)
        self.target_critics.set_weights(self.critics.get_weights())
        log_alpha = float(np.log(config.initial_alpha))
        self.log_alpha_a = tf.Variable(log_alpha, dtype=tf.float32, name="log_alpha_a")
        self.log_alpha_b = tf.Variable(log_alpha, dtype=tf.float32, name="log_alpha_b")
        alpha_lr = config.alpha_learning_rate or config.learning_rate
        self.actor_optimizer = keras.optimizers.Adam(config.learning_rate)
        self.critic_optimizer = keras.optimizers.Adam(config.learning_rate)
        self.alpha_optimizer = keras.optimizers.Adam(alpha_lr)
        self.actor_optimizer.build(self.actor.trainable_variables)
        self.critic_optimizer.build(self.critics.trainable_variables)
        self.alpha_optimizer.build([self.log_alpha_a, self.log_alpha_b])
        self.updates = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates")
        # Consecutive skipped updates (not checkpointed: a resumed run counts afresh).
        self.nonfinite_streak = tf.Variable(0, dtype=tf.int64, trainable=False)
        self._seed = tf.Variable([int(seed), 0], dtype=tf.int64, trainable=False, name="seed")
        self.target_beta_entropy, self.target_action_entropy = config.target_entropies(action_dim)
        self._train = tf.function(
            self._train_calls, jit_compile=config.jit_compile, autograph=False
        )

    def checkpoint_items(self) -> dict:
        """Trackables saved with the run (networks, targets, temperatures, optimizers)."""
        return {
            "actor": self.actor,
            "critics": self.critics,
            "target_critics": self.target_critics,
            "log_alpha_a": self.log_alpha_a,
            "log_alpha_b": self.log_alpha_b,
            "actor_optimizer": self.actor_optimizer,
            "critic_optimizer": self.critic_optimizer,
            "alpha_optimizer": self.alpha_optimizer,
            "learner_updates": self.updates,
            "sample_seed": self._seed,
        }

    def _replicas(self, q: tf.Tensor) -> tf.Tensor:
        """Critic outputs ``[N, R * D] -> [N, R, D]`` (index ``r * D + d``, as ALF)."""
        return tf.reshape(q, [tf.shape(q)[0], self.config.num_critic_replicas, -1])

    def _losses(self, batch: dict, seed: tf.Tensor) -> tuple[tf.Tensor, ...]:
        """Actor, critic and alpha losses of one window batch and their metrics."""
        s_noise, s_b = tf.unstack(tf.random.experimental.stateless_split(seed, 2))
        n = tf.size(batch["is_last"])
        noise = tf.random.stateless_normal([n, self.action_dim], s_noise)
        return self.losses_from_noise(batch, noise, tf.random.stateless_uniform([n], s_b))

    def losses_from_noise(
        self, batch: dict, noise: tf.Tensor, b_uniform: tf.Tensor
    ) -> tuple[tf.Tensor, ...]:
        """The losses of one ``[T, B]`` window batch given the update's draws: ``noise``
        ``[T * B, A]`` standard normal (the actor's reparameterized sample) and ``b_uniform``
        ``[T * B]`` uniform in [0, 1) (the current policy's ``b = 1`` iff it is below
        ``beta_1``). Returns ``(actor_loss, critic_loss, alpha_loss, metrics)``."""
        cfg, traj, weights = self.config, self.trajectory, self.reward_weights
        shape = tf.shape(batch["is_last"])
        obs = _merge(tf.cast(batch["observation"], tf.float32))
        prev_tau = _merge(tf.cast(batch["prev_tau"], tf.float32))
        n = tf.shape(obs)[0]
        loc, log_std = self.actor(obs, prev_tau)
        x = squashed_sample(loc, log_std, noise)
        log_pi = squashed_log_prob(loc, log_std, noise)
        follow, fresh = traj.follow(prev_tau), traj.from_action(x, prev_tau)
        # One critic call over [tau^-; tau_hat; tau_rollout].
        q_all = self._replicas(
            self.critics(
                tf.concat([obs, obs, obs], 0),
                tf.concat([follow, fresh, _merge(tf.cast(batch["tau"], tf.float32))], 0),
            )
        )  # [3N, R, D]
        q_follow = taac_loss.critic_value(q_all[:n], weights)
        q_fresh = taac_loss.critic_value(q_all[n : 2 * n], weights)
        q_rollout = q_all[2 * n :]
        logits = taac_loss.beta_logits(
            q_follow, q_fresh, tf.exp(self.log_alpha_b), cfg.b1_advantage_clipping
        )
        probs = tf.nn.softmax(logits)
        log_probs = tf.nn.log_softmax(logits)
        beta_entropy = -tf.reduce_sum(probs * log_probs, axis=-1)
        train_b = tf.cast(b_uniform < probs[:, 1], tf.int32)
        actor_loss = taac_loss.actor_loss(probs[:, 1], q_fresh, log_pi, tf.exp(self.log_alpha_a))
        q_target = taac_loss.replica_min(
            self._replicas(
                self.target_critics(
                    tf.concat([obs, obs], 0), tf.stop_gradient(tf.concat([follow, fresh], 0))
                )
            ),
            weights,
        )  # [2N, D]
        target_values = probs[:, :1] * q_target[:n] + probs[:, 1:] * q_target[n:]
        tb = lambda v, *rest: tf.reshape(v, tf.concat([shape, tf.constant(rest, tf.int32)], 0))  # noqa: E731
        d = cfg.reward_dim
        rewards = tf.cast(batch["reward"], tf.float32) * cfg.reward_scale
        gammas = tf.constant(cfg.resolved_reward_discounts, tf.float32)
        critic = taac_loss.critic_loss(
            tb(q_rollout, cfg.num_critic_replicas, d),
            tb(rewards, d),
            tf.cast(batch["discount"], tf.float32)[..., tf.newaxis] * gammas,
            tf.stop_gradient(tb(target_values, d)),
            tf.cast(batch["is_last"], tf.bool),
            tf.cast(batch["b"], tf.bool),
            tb(train_b) > 0,
            td_loss=cfg.td_loss,
            mask_last_steps=cfg.mask_last_steps,
        )
        alpha_loss = taac_loss.alpha_loss(
            self.log_alpha_a,
            self.log_alpha_b,
            -log_pi,
            beta_entropy,
            self.target_action_entropy,
            self.target_beta_entropy,
        )
        metrics = {
            "actor_loss": actor_loss,
            "critic_loss": critic.loss,
            "alpha_loss": alpha_loss,
            "action_entropy": -tf.reduce_mean(log_pi),
            "beta_entropy": tf.reduce_mean(beta_entropy),
            "p_b1": tf.reduce_mean(probs[:, 1]),
            "q_rollout": tf.reduce_mean(q_rollout),
            "advantage": tf.reduce_mean(q_fresh - q_follow),
        }
        return actor_loss, critic.loss, alpha_loss, metrics

    def _update(self, batch: dict, seed: tf.Tensor) -> dict[str, tf.Tensor]:
        """One update; skipped (nothing applied, ``nonfinite_streak`` counted) when a loss
        or a gradient is not finite, so no optimizer state moves either."""
        variables = (
            self.actor.trainable_variables,
            self.critics.trainable_variables,
            [self.log_alpha_a, self.log_alpha_b],
        )
        optimizers = (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer)
        with tf.GradientTape(persistent=True) as tape:
            *losses, metrics = self._losses(batch, seed)
        clipped, finite = [], tf.constant(True)
        for loss, part, name in zip(losses, variables, ("actor", "critic", None), strict=True):
            grads, norm, ok = clip_and_check(tape.gradient(loss, part), self.config.max_grad_norm)
            clipped.append(grads)
            finite = tf.logical_and(finite, tf.logical_and(ok, tf.math.is_finite(loss)))
            if name is not None:
                metrics[f"{name}_grad_norm"] = norm
        del tape

        def apply():
            for optimizer, grads, part in zip(optimizers, clipped, variables, strict=True):
                optimizer.apply(grads, part)
            self.nonfinite_streak.assign(0)
            return tf.constant(0.0)

        def skip():
            self.nonfinite_streak.assign_add(1)
            return tf.constant(1.0)

        metrics["skipped"] = tf.cond(finite, apply, skip)
        self.updates.assign_add(1)
        rate = tf.where(
            self.updates % self.config.target_update_period == 0,
            self.config.target_update_tau,
            0.0,
        )
        for target, source in zip(
            self.target_critics.trainable_variables, variables[1], strict=True
        ):
            target.assign(target + rate * (source - target))
        return metrics

    def _train_calls(self, batches: dict) -> dict[str, tf.Tensor]:
        base = self._seed.read_value()
        self._seed.assign_add([0, 1])

        def body(i, totals):
            seed = tf.stack([base[0], base[1] * 1024 + tf.cast(i, tf.int64)])
            metrics = self._update({k: v[i] for k, v in batches.items()}, seed)
            return i + 1, tuple(t + metrics[k] for t, k in zip(totals, METRIC_KEYS, strict=True))

        totals = tuple(tf.zeros([]) for _ in METRIC_KEYS)
        num = tf.shape(batches["is_last"])[0]
        _, totals = tf.while_loop(lambda i, _: i < num, body, (tf.constant(0), totals))
        return dict(zip(METRIC_KEYS, totals, strict=True))

    def train(self, batches: dict) -> dict[str, float]:
        """Runs K updates on ``batches`` (``[K, T, B, ...]`` numpy, keys ``BATCH_KEYS``);
        returns the metrics averaged over the K updates, plus both temperatures."""
        missing = [k for k in BATCH_KEYS if k not in batches]
        if missing:
            raise ValueError(f"batches: missing keys {missing}, expected {BATCH_KEYS}")
        k = int(np.shape(batches["is_last"])[0])
        totals = self._train({key: batches[key] for key in BATCH_KEYS})
        out = {name: float(v) / k for name, v in totals.items()}
        out["alpha_a"] = float(np.exp(self.log_alpha_a.numpy()))
        out["alpha_b"] = float(np.exp(self.log_alpha_b.numpy()))
        out["nonfinite_streak"] = float(self.nonfinite_streak.numpy())
        return out
