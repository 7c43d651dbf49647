"""Running normalisation kept inside the network, so that it is model state: in every
checkpoint, published to the actors with the weights, and applied inside every exported
policy (which then takes raw observations).

:class:`RunningNormalizer` holds a running mean and variance (the parallel merge of Chan,
Golub and LeVeque 1979, as OpenAI Baselines' and SB3's ``RunningMeanStd``) in non-trainable
variables; calling it normalises and clips, and :meth:`RunningNormalizer.update` merges a
batch of samples into the statistics. Only the learner updates them, from the observations of
the unrolls it trains on (what the actors saw); evaluations and exports only apply them.
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

# The statistics start as if they had seen a few zero-mean unit-variance samples (SB3's
# epsilon count), so the first update dominates without a division by zero.
INITIAL_COUNT = 1e-4
CLIP = 10.0  # SB3 VecNormalize's clip_obs / clip_reward
EPSILON = 1e-8


class RunningNormalizer(keras.layers.Layer):
    """``clip((x - mean) / sqrt(var + eps), -clip, clip)`` with a running ``mean`` and ``var``
    of shape ``shape`` (one per feature) over every sample :meth:`update` has seen."""

    def __init__(self, shape, clip: float = CLIP, **kw):
        super().__init__(**kw)
        self.shape, self.clip = tuple(int(d) for d in shape), float(clip)
        self.mean = self.add_weight(
            shape=self.shape, initializer="zeros", trainable=False, name="mean"
        )
        self.var = self.add_weight(
            shape=self.shape, initializer="ones", trainable=False, name="var"
        )
        self.count = self.add_weight(
            shape=(), initializer=keras.initializers.Constant(INITIAL_COUNT), trainable=False,
            name="count", dtype="float64",
        )  # fmt: skip

    def call(self, x):
        x = tf.cast(x, tf.float32)
        scaled = (x - self.mean) / tf.sqrt(self.var + EPSILON)
        return tf.clip_by_value(scaled, -self.clip, self.clip)

    def update(self, samples) -> None:
        """Merges ``samples`` ``[..., *shape]`` (any leading dims) into the statistics (numpy
        arithmetic in float64; the variables are assigned once each)."""
        x = np.asarray(samples, np.float64).reshape((-1, *self.shape))
        if not len(x):
            return
        mean, var, count = merge_moments(
            np.asarray(self.mean.numpy(), np.float64),
            np.asarray(self.var.numpy(), np.float64),
            float(self.count.numpy()),
            x.mean(axis=0),
            x.var(axis=0),
            len(x),
        )
        self.mean.assign(mean.astype(np.float32))
        self.var.assign(var.astype(np.float32))
        self.count.assign(count)


def merge_moments(mean, var, count, batch_mean, batch_var, batch_count):
    """The mean, (population) variance and count of two sample sets given theirs (Chan et al.
    1979's pairwise update)."""
    delta = batch_mean - mean
    total = count + batch_count
    new_mean = mean + delta * batch_count / total
    m2 = var * count + batch_var * batch_count + np.square(delta) * count * batch_count / total
    return new_mean, m2 / total, total


def normalizable(spec: tf.TensorSpec) -> bool:
    """Whether an observation leaf of ``spec`` is normalised: float Box features; uint8
    images and integer (Discrete, one-hot encoded) observations are left as they are."""
    return spec.dtype.is_floating


class ReturnScaler:
    """Rewards divided by a running estimate of the discounted return's standard deviation,
    clipped (SB3 VecNormalize's ``norm_reward``): the scale of the value targets stays near
    one whatever the reward's units. The return of each column is carried across the unrolls
    of one source (``G_t = r_t + discount * G_{t-1}``, reset where an episode starts); its
    statistics are a :class:`RunningNormalizer` (``statistics``, checkpointed by the run)."""

    def __init__(self, discount: float, clip: float = CLIP):
        self.discount, self.clip = float(discount), float(clip)
        self.statistics = RunningNormalizer((), clip=clip, name="return_norm")
        self._returns: dict = {}  # source -> the running return of each column [B]

    def update(self, unrolls) -> None:
        """Merges the returns of ``unrolls`` into the statistics: ``(reward, first, source)``
        each, ``reward`` ``[T, B]``, ``first`` ``[T, B]`` marking the steps that start an
        episode, ``source`` naming the actor whose columns these are (its unrolls arrive in
        order)."""
        out = []
        for reward, first, source in unrolls:
            reward = np.asarray(reward, np.float64)
            g = self._returns.get(source)
            if g is None or g.shape != reward.shape[1:]:
                g = np.zeros(reward.shape[1:])
            returns = np.empty_like(reward)
            keep = 1.0 - np.asarray(first, np.float64)
            for t in range(len(reward)):
                g = reward[t] + self.discount * g * keep[t]
                returns[t] = g
            self._returns[source] = g
            out.append(returns.ravel())
        if out:
            self.statistics.update(np.concatenate(out))

    def scale(self, reward: np.ndarray) -> np.ndarray:
        """``reward`` divided by the return's running standard deviation, clipped."""
        std = np.sqrt(float(self.statistics.var.numpy()) + EPSILON)
        return np.clip(np.asarray(reward, np.float32) / np.float32(std), -self.clip, self.clip)
