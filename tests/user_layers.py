"""Layers of a user's own for the actor-critic network (``torso=`` / ``core=``), importable
by path as ``tests.user_layers:Name``.

* :class:`LayerNormTorso`: flatten, Dense 32, LayerNorm, tanh (LayerNorm's gamma starts at 1
  and beta at 0, so trained weights are told from fresh ones).
* :class:`FlattenTorso`: no weights, returns the flattened observation it receives (what the
  network gives a torso of one's own, read back).
* :class:`DictFlattenTorso`: the same for a Dict observation, the leaves concatenated in
  sorted key order.
* :class:`SpaceTorso`: constructed with ``observation_space=``; Dense of as many units as the
  observation has entries.
* :func:`dense_torso`: a function ``(observation_space) -> layer``.
* :class:`SmallGRU`: ``keras.layers.GRUCell(8)``, constructed with no arguments.
* :class:`TwoStateCell`: an LSTM cell of 4 units with a state of two tensors.
* :class:`NotALayer`: a class that is not a Keras layer.
"""

import keras
import numpy as np
import tensorflow as tf


class LayerNormTorso(keras.layers.Layer):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.flatten = keras.layers.Flatten()
        self.dense = keras.layers.Dense(32)
        self.norm = keras.layers.LayerNormalization()

    def call(self, x):
        return keras.activations.tanh(self.norm(self.dense(self.flatten(x))))


class FlattenTorso(keras.layers.Layer):
    def call(self, x):
        return keras.layers.Flatten()(x)


class DictFlattenTorso(keras.layers.Layer):
    def call(self, x):
        return tf.concat([tf.reshape(x[k], [tf.shape(x[k])[0], -1]) for k in sorted(x)], -1)


class SpaceTorso(keras.layers.Layer):
    def __init__(self, observation_space, **kw):
        super().__init__(**kw)
        self.space = observation_space
        self.dense = keras.layers.Dense(int(np.prod(observation_space.shape)), activation="relu")

    def call(self, x):
        return self.dense(keras.layers.Flatten()(x))


def dense_torso(observation_space):
    del observation_space
    return keras.layers.Dense(12, activation="tanh")


class SmallGRU(keras.layers.GRUCell):
    def __init__(self, **kw):
        super().__init__(8, **kw)


class TwoStateCell(keras.layers.LSTMCell):
    def __init__(self, **kw):
        super().__init__(4, **kw)


class NotALayer:
    pass
