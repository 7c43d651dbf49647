"""Output heads on a ``[N, F]`` feature batch: policy parameters, V(s), Q(s, .) and ACER's SDN.

* :class:`CategoricalHead` -> ``{"logits": [N, A]}``.
* :class:`MultiCategoricalHead` (MultiDiscrete actions) -> ``{"multi_logits": [N, sum(nvec)]}``,
  one block of logits per action dimension; :class:`BernoulliHead` (MultiBinary actions) ->
  ``{"bernoulli_logits": [N, n]}``. Their own keys keep the single-categorical fast paths
  (which look for ``logits``) away from them.
* :class:`GaussianHead` -> ``{"loc": [N, A], "scale": [N, A]}`` with a state-dependent or a
  global (learned, state-independent) std, ``scale = softplus(raw) + min_std``. The same
  parameters serve the diagonal Gaussian and the tanh-squashed Gaussian (the squashing lives
  in the distribution, see ``distributions.py``).
* :class:`ValueHead` -> V(s) ``[N]``; :class:`DiscreteQHead` -> Q(s, .) ``[N, A]``.
* :class:`StochasticDuelingHead`: the stochastic dueling network of ACER (Wang et al. 2016,
  https://arxiv.org/abs/1611.01224, Sec. 4.2)::

      Q~(s, a) = V(s) + A(s, a) - 1/n sum_i A(s, a'_i),    a'_i ~ pi(. | s)

  with A(s, a) an MLP on ``[features, action]`` (or on ``[adv_features, action]``, the
  unshared model). Gradients flow into V, A and the features; the sampled a'_i are treated
  as constants (stop-gradient).
"""

from __future__ import annotations

import math

import keras
import tensorflow as tf

from tfagents_vtrace.networks.torsos import track_layers


def _softplus_inverse(x: float) -> float:
    return math.log(math.expm1(x))


def _dense(units: int, scale: float, activation=None, bias: float = 0.0) -> keras.layers.Dense:
    return keras.layers.Dense(
        units,
        activation=activation,
        kernel_initializer=keras.initializers.Orthogonal(scale),
        bias_initializer=keras.initializers.Constant(bias),
    )


class _LogitsHead(keras.layers.Layer):
    """One dense layer of logits (orthogonal init of scale ``init_scale``):
    ``[N, F] -> {KEY: [N, size]}``."""

    KEY = "logits"

    def __init__(self, size: int, init_scale: float, **kw):
        super().__init__(**kw)
        self.logits = _dense(size, init_scale)

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
        return {self.KEY: self.logits(features)}


class CategoricalHead(_LogitsHead):
    """Logits of a categorical policy: ``[N, F] -> {"logits": [N, num_actions]}``."""

    def __init__(self, num_actions: int, init_scale: float = 0.01, **kw):
        super().__init__(num_actions, init_scale, **kw)


class MultiCategoricalHead(_LogitsHead):
    """Logits of independent categoricals, one block per action dimension:
    ``[N, F] -> {"multi_logits": [N, sum(nvec)]}`` (see ``distributions.py``)."""

    KEY = "multi_logits"

    def __init__(self, nvec, init_scale: float = 0.01, **kw):
        nvec = tuple(int(n) for n in nvec)
        super().__init__(sum(nvec), init_scale, **kw)
        self.nvec = nvec


class BernoulliHead(_LogitsHead):
    """Logits of independent Bernoulli bits: ``[N, F] -> {"bernoulli_logits": [N, n]}``."""

    KEY = "bernoulli_logits"

    def __init__(self, num_bits: int, init_scale: float = 0.01, **kw):
        super().__init__(num_bits, init_scale, **kw)


class GaussianHead(keras.layers.Layer):
    """Diagonal Gaussian parameters: ``[N, F] -> {"loc": [N, A], "scale": [N, A]}``.

    Args:
      action_dim: A.
      std: "state" (scale is a dense function of the features) or "global" (a learned
        [A] vector broadcast over the batch).
      init_std: the initial scale (exactly, for "global"; at zero features, for "state").
      min_std: added to softplus(raw) so the scale stays positive.
      init_scale: orthogonal-initializer scale of the loc (and state-std) layer.
    """

    def __init__(
        self,
        action_dim: int,
        std: str = "state",
        init_std: float = 1.0,
        min_std: float = 1e-3,
        init_scale: float = 0.01,
        **kw,
    ):
        super().__init__(**kw)
        if std not in ("state", "global"):
            raise ValueError(f"std must be 'state' or 'global', got {std!r}")
        self.std_mode = std
        self.min_std = float(min_std)
        raw0 = _softplus_inverse(init_std - min_std)
        self.loc = _dense(action_dim, init_scale)
        if std == "state":
            self.raw_scale = _dense(action_dim, init_scale, bias=raw0)
        else:
            self.raw_scale = self.add_weight(
                shape=(action_dim,),
                initializer=keras.initializers.Constant(raw0),
                name="raw_scale",
            )

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, features: tf.Tensor) -> dict[str, tf.Tensor]:
        loc = self.loc(features)
        if self.std_mode == "state":
            raw = self.raw_scale(features)
        else:
            raw = tf.zeros_like(loc) + tf.convert_to_tensor(self.raw_scale)
        return {"loc": loc, "scale": tf.nn.softplus(raw) + self.min_std}


class ValueHead(keras.layers.Layer):
    """State value: ``[N, F] -> [N]``."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.value = _dense(1, 1.0)

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, features: tf.Tensor) -> tf.Tensor:
        return tf.squeeze(self.value(features), axis=-1)


class DiscreteQHead(keras.layers.Layer):
    """Action values for every discrete action: ``[N, F] -> [N, num_actions]``."""

    def __init__(self, num_actions: int, **kw):
        super().__init__(**kw)
        self.q = _dense(num_actions, 1.0)

    def build(self, input_shape):
        self.built = True  # sublayers build on the first call

    def call(self, features: tf.Tensor) -> tf.Tensor:
        return self.q(features)


class StochasticDuelingHead(keras.layers.Layer):
    """ACER's stochastic dueling network on ``[N, F]`` features (see module docstring).

    Actions are given *encoded* as float vectors ``[..., N, E]`` (one-hot for discrete
    actions, the raw action for continuous ones).
    """

    def __init__(self, hidden_sizes: tuple[int, ...] = (64,), activation: str = "tanh", **kw):
        super().__init__(**kw)
        self.value_head = ValueHead()
        self.adv_hidden = [_dense(h, 1.0, activation=activation) for h in hidden_sizes]
        track_layers(self, "adv_hidden", self.adv_hidden)
        self.adv_out = _dense(1, 1.0)

    def advantage(self, features: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
        """A(s, a): features ``[N, F]`` (broadcast over leading sample dims of actions),
        actions ``[..., N, E]`` -> ``[..., N]``."""
        extra = actions.shape.rank - features.shape.rank
        f = tf.reshape(features, [1] * extra + [-1, features.shape[-1]])
        f = tf.broadcast_to(f, tf.concat([tf.shape(actions)[:-1], [features.shape[-1]]], 0))
        x = tf.concat([f, actions], axis=-1)
        for layer in self.adv_hidden:
            x = layer(x)
        return tf.squeeze(self.adv_out(x), axis=-1)

    def call(
        self,
        features: tf.Tensor,
        actions: tf.Tensor,
        sampled_actions: tf.Tensor,
        adv_features: tf.Tensor | None = None,
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Q~(s, a) and V(s).

        Args:
          features: ``[N, F]`` input of V (and of A unless ``adv_features``).
          actions: encoded actions a, ``[N, E]``.
          sampled_actions: encoded a'_i ~ pi, ``[n, N, E]`` (treated as constants).
          adv_features: ``[N, F']`` input of A(s, a) when it differs from V's (the unshared
            model, chainerrl's ``ACERSDNSeparateModel``: the flattened observation).
        Returns:
          (q ``[N]``, v ``[N]``).
        """
        v = self.value_head(features)
        adv_features = features if adv_features is None else adv_features
        adv = self.advantage(adv_features, actions)
        adv_mean = tf.reduce_mean(
            self.advantage(adv_features, tf.stop_gradient(sampled_actions)), axis=0
        )
        return v + adv - adv_mean, v
