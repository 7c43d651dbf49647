"""Trajectories of TAAC (constant), TaacL (linear) and TaacQ (quadratic).

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. A trajectory ``tau`` is a ``[N, k, A]`` tensor holding
``k`` vectors of actions in [-1, 1]: ``a`` (k = 1), ``(a, v)`` (k = 2) or ``(a, v, u)``
(k = 3); the action taken is ``tau[:, 0]``. Two deterministic maps define each kind:

* ``follow(tau)`` moves one step along the previous trajectory (b = 0)::

    constant:  a' = a
    linear:    a' = clip(a + 2 v, -1, 1)                            (v, u unchanged)
    quadratic: v' = clip(v + 2 u, -1, 1);  a' = clip(a + 2 v', -1, 1)

* ``from_action(x, tau)`` starts a new trajectory from the actor's sample ``x`` (b = 1)::

    constant:            (x,)
    linear, inverse:     (x, (x - a) / 2)
    linear, direct:      follow((a, x))          x is the new derivative v
    quadratic, inverse:  (x, (x - a) / 2, (x - a) / 4)
    quadratic, direct:   follow((a, 0, x))       x is the new second derivative u

Both are differentiable in ``x`` (the actor loss differentiates Q through ``from_action``).
"""

from __future__ import annotations

import tensorflow as tf

__all__ = ["Trajectory"]


class Trajectory:
    """The trajectory maps of one kind (see module docstring).

    Args:
      kind: "constant", "linear" or "quadratic".
      inverse_mode: the new action sample is the next action (True) or the highest
        derivative (False); ignored for "constant".
    """

    def __init__(self, kind: str, inverse_mode: bool = True):
        kinds = ("constant", "linear", "quadratic")
        if kind not in kinds:
            raise ValueError(f"trajectory: expected one of {kinds}, received {kind!r}")
        self.kind = kind
        self.inverse_mode = bool(inverse_mode)
        self.order = kinds.index(kind) + 1

    def _check(self, tau: tf.Tensor) -> tf.Tensor:
        tau = tf.convert_to_tensor(tau, tf.float32)
        if tau.shape.rank != 3 or (tau.shape[1] is not None and tau.shape[1] != self.order):
            raise ValueError(
                f"tau: expected shape [N, {self.order}, A], received {tau.shape.as_list()}"
            )
        return tau

    def action(self, tau: tf.Tensor) -> tf.Tensor:
        """``[N, k, A] -> [N, A]``: the action the trajectory takes now."""
        return self._check(tau)[:, 0]

    def follow(self, tau: tf.Tensor) -> tf.Tensor:
        """One step along ``tau`` ``[N, k, A]`` (see module docstring); same shape."""
        tau = self._check(tau)
        if self.order == 1:
            return tau
        a, v = tau[:, 0], tau[:, 1]
        if self.order == 2:
            return tf.stack([tf.clip_by_value(a + 2.0 * v, -1.0, 1.0), v], axis=1)
        u = tau[:, 2]
        v = tf.clip_by_value(v + 2.0 * u, -1.0, 1.0)
        return tf.stack([tf.clip_by_value(a + 2.0 * v, -1.0, 1.0), v, u], axis=1)

    def from_action(self, x: tf.Tensor, tau: tf.Tensor) -> tf.Tensor:
        """A new trajectory ``[N, k, A]`` from the actor's sample ``x`` ``[N, A]`` and the
        previous ``tau`` (see module docstring). Gradients flow to ``x``."""
        tau = self._check(tau)
        x = tf.convert_to_tensor(x, tf.float32)
        if x.shape.rank != 2:
            raise ValueError(f"x: expected shape [N, A], received {x.shape.as_list()}")
        if self.order == 1:
            return x[:, tf.newaxis]
        a = tau[:, 0]
        if self.inverse_mode:
            v = (x - a) / 2.0
            parts = [x, v] if self.order == 2 else [x, v, v / 2.0]
            return tf.stack(parts, axis=1)
        if self.order == 2:
            return self.follow(tf.stack([a, x], axis=1))
        return self.follow(tf.stack([a, tf.zeros_like(x), x], axis=1))

    def zeros(self, batch_size, action_dim: int) -> tf.Tensor:
        """The initial trajectory: zeros ``[batch_size, k, A]``."""
        return tf.zeros([batch_size, self.order, action_dim], tf.float32)

    def random(self, batch_size, action_dim: int, seed=None) -> tf.Tensor:
        """A uniformly random trajectory in [-1, 1] (``randomize_first_state_tau``)."""
        shape = [batch_size, self.order, action_dim]
        if seed is None:
            return tf.random.uniform(shape, -1.0, 1.0)
        return tf.random.stateless_uniform(shape, seed, -1.0, 1.0)
