"""TAAC's actor pi(a | s, tau^-) and critic replicas Q_i(s, tau) as Keras 3 layers.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. As in ALF, the actor sees the previous trajectory through
one linear embedding per trajectory vector (``[A] -> [obs_dim]``), concatenated with the
observation; the critics (one MLP per replica and reward dim) see the observation
concatenated with the flattened trajectory.
The action distribution is a tanh-squashed diagonal Gaussian on [-1, 1]^A.
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfagents_vtrace.networks.torsos import track_layers

__all__ = ["LOG_STD_RANGE", "TaacActor", "TaacCritics", "squashed_log_prob", "squashed_sample"]

LOG_STD_RANGE = (-5.0, 2.0)


def _mlp(hidden_sizes: tuple[int, ...], prefix: str) -> list[keras.layers.Layer]:
    return [
        keras.layers.Dense(h, activation="relu", name=f"{prefix}_{i}")
        for i, h in enumerate(hidden_sizes)
    ]


def _flat_obs(observation: tf.Tensor) -> tf.Tensor:
    observation = tf.cast(observation, tf.float32)
    return tf.reshape(observation, [tf.shape(observation)[0], -1])


class TaacActor(keras.layers.Layer):
    """``(observation [N, ...], tau [N, k, A]) -> (loc [N, A], log_std [N, A])``.

    ``log_std`` is squashed into ``LOG_STD_RANGE`` with a tanh.
    """

    def __init__(self, obs_dim: int, action_dim: int, order: int, hidden_sizes=(256, 256), **kw):
        super().__init__(**kw)
        self.obs_dim, self.action_dim, self.order = int(obs_dim), int(action_dim), int(order)
        self.tau_embeddings = [
            keras.layers.Dense(self.obs_dim, name=f"tau_embed_{i}") for i in range(order)
        ]
        self.hidden = _mlp(tuple(hidden_sizes), "actor_hidden")
        self.head = keras.layers.Dense(2 * self.action_dim, name="actor_head")
        track_layers(self, "tau_embed", self.tau_embeddings)
        track_layers(self, "actor_hidden", self.hidden)

    def call(self, observation: tf.Tensor, tau: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        parts = [_flat_obs(observation)]
        parts += [emb(tau[:, i]) for i, emb in enumerate(self.tau_embeddings)]
        x = tf.concat(parts, axis=-1)
        for layer in self.hidden:
            x = layer(x)
        loc, raw = tf.split(self.head(x), 2, axis=-1)
        low, high = LOG_STD_RANGE
        log_std = low + 0.5 * (high - low) * (tf.tanh(raw) + 1.0)
        return loc, log_std


class TaacCritics(keras.layers.Layer):
    """``num_critics`` independent critics: ``(observation [N, ...], tau [N, k, A]) -> Q
    [N, num_critics]``. TAAC builds ``R * D`` of them (R replicas, D reward dims; ALF's
    ``make_parallel(num_critic_replicas * reward_dim)``), output ``r * D + d`` being replica
    r's value of reward dim d."""

    def __init__(self, hidden_sizes=(256, 256), num_critics: int = 2, **kw):
        super().__init__(**kw)
        self.num_critics = int(num_critics)
        self.towers = [_mlp(tuple(hidden_sizes), f"critic{i}_hidden") for i in range(num_critics)]
        self.heads = [keras.layers.Dense(1, name=f"critic{i}_head") for i in range(num_critics)]
        track_layers(self, "tower", self.towers)
        track_layers(self, "head", self.heads)

    def call(self, observation: tf.Tensor, tau: tf.Tensor) -> tf.Tensor:
        flat_tau = tf.reshape(tau, [tf.shape(tau)[0], -1])
        x0 = tf.concat([_flat_obs(observation), flat_tau], axis=-1)
        outs = []
        for tower, head in zip(self.towers, self.heads, strict=True):
            x = x0
            for layer in tower:
                x = layer(x)
            outs.append(head(x))
        return tf.concat(outs, axis=-1)


def squashed_sample(loc: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor) -> tf.Tensor:
    """``tanh(loc + exp(log_std) * noise)``, ``[N, A]``; reparameterized (gradients flow to
    ``loc`` and ``log_std``)."""
    return tf.tanh(loc + tf.exp(log_std) * noise)


def squashed_log_prob(loc: tf.Tensor, log_std: tf.Tensor, noise: tf.Tensor) -> tf.Tensor:
    """``log pi(tanh(u))`` ``[N]`` for ``u = loc + exp(log_std) * noise``::

    log N(u; loc, std) - sum_A log(1 - tanh(u)^2),
    log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2 u))
    """
    u = loc + tf.exp(log_std) * noise
    gauss = -0.5 * tf.square(noise) - log_std - 0.5 * math.log(2.0 * math.pi)
    log_det = 2.0 * (math.log(2.0) - u - tf.nn.softplus(-2.0 * u))
    return tf.reduce_sum(gauss - log_det, axis=-1)
