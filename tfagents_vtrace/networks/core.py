"""LSTM core that resets its state where an episode starts, stepping or unrolling ``[T, B]``.

The recurrent state is a flat tuple of float32 tensors ``(h [B, H], c [B, H])``, plus
``t [B, 1]`` (the time step within the episode) when ``use_time_step`` is set, as in the
meta-RL LSTM of Wang et al. 2016 (https://arxiv.org/abs/1611.05763), whose core input is
``[features, one_hot(a_{t-1}), r_{t-1}, t]``. The reset-where-first unroll follows IMPALA
(Espeholt et al. 2018, https://arxiv.org/abs/1802.01561).

Recursion, for each step t and batch entry b::

    s_t^b = 0                      if first_t^b else s_{t-1}^b      (h, c and the counter t)
    x_t^b = [x_t^b, time_step_scale * t^b]                          (if use_time_step)
    (y_t^b, (h, c)) = LSTMCell(x_t^b, (h, c))
    t^b <- t^b + 1

``unroll`` runs that recursion with ``tf.scan`` (a while loop: T may be dynamic, and it
compiles under XLA) on the cell's own weights, with the input projection of all T steps
hoisted out of the loop; stepping T times equals one unroll (tested).

:class:`CellCore` runs a Keras RNN cell of one's own (``NetworkConfig.core=
"package.module:Name"``) under the same contract: zero initial state, reset where ``first``.
"""

from __future__ import annotations

import keras
import tensorflow as tf


def reset_where_first(state: tuple[tf.Tensor, ...], first: tf.Tensor) -> tuple[tf.Tensor, ...]:
    """Zeroes each ``[B, ...]`` state tensor for the batch entries where ``first`` ([B] bool)."""
    keep = 1.0 - tf.cast(first, tf.float32)
    out = []
    for s in state:
        s = tf.convert_to_tensor(s)
        k = tf.reshape(keep, [-1] + [1] * (s.shape.rank - 1))
        out.append(s * tf.cast(k, s.dtype))
    return tuple(out)


class _Core(keras.layers.Layer):
    """What the network asks of a recurrent core: ``state_sizes``, zeros as the initial
    state, ``step`` (one ``[B]`` step, reset where ``first``) and ``unroll`` (``[T, B]``)."""

    state_sizes: tuple[int, ...]

    def initial_state(self, batch_size) -> tuple[tf.Tensor, ...]:
        """Zero state: tuple of float32 ``[batch_size, size]`` for size in ``state_sizes``."""
        return tuple(tf.zeros([batch_size, n], tf.float32) for n in self.state_sizes)

    def call(self, x, first, state):
        return self.step(x, first, state)

    def step(
        self, x: tf.Tensor, first: tf.Tensor, state: tuple[tf.Tensor, ...]
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        """One step: x ``[B, F]``, first ``[B]`` bool, state -> (y ``[B, H]``, new state)."""
        if not self.built:
            self.build(x.shape)
        state = reset_where_first(tuple(state), first)
        return self._cell_step(x, state)

    def _cell_step(self, x: tf.Tensor, state: tuple[tf.Tensor, ...]):
        """The step from a state already reset where an episode starts."""
        raise NotImplementedError


class LSTMCore(_Core):
    """``keras.layers.LSTMCell`` with reset-where-first, a step and a ``[T, B]`` unroll.

    Args:
      units: LSTM size H.
      use_time_step: keep a per-entry step counter in the state and append
        ``time_step_scale * t`` to the input.
      time_step_scale: scale of the time-step input.
    """

    def __init__(self, units: int, use_time_step: bool = False, time_step_scale: float = 1.0, **kw):
        super().__init__(**kw)
        self.units = int(units)
        self.use_time_step = bool(use_time_step)
        self.time_step_scale = float(time_step_scale)
        self.cell = keras.layers.LSTMCell(self.units)

    @property
    def state_sizes(self) -> tuple[int, ...]:
        """Last-dimension size of each state tensor: ``(H, H)`` or ``(H, H, 1)``."""
        return (self.units, self.units, 1) if self.use_time_step else (self.units, self.units)

    def build(self, input_shape):
        """Builds the cell for inputs ``[..., F]`` (F + 1 inputs with the time step)."""
        n_in = int(input_shape[-1]) + (1 if self.use_time_step else 0)
        if not self.cell.built:
            self.cell.build((None, n_in))
        self.built = True

    def _cell_step(self, x: tf.Tensor, state: tuple[tf.Tensor, ...]):
        h, c = state[0], state[1]
        if self.use_time_step:
            x = tf.concat([x, self.time_step_scale * state[2]], axis=-1)
        y, (h, c) = self.cell(x, [h, c])
        if self.use_time_step:
            return y, (h, c, state[2] + 1.0)
        return y, (h, c)

    def unroll(
        self, x: tf.Tensor, first: tf.Tensor, state: tuple[tf.Tensor, ...]
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        """Unroll over time. x ``[T, B, F]``, first ``[T, B]`` -> (y ``[T, B, H]``, final state).

        T must be >= 1.
        Equivalent to calling ``step`` T times; gradients flow through the whole unroll
        (truncated at resets, where the state is multiplied by zero).
        """
        state = tuple(tf.convert_to_tensor(s) for s in state)
        if not self.built:
            self.build(x.shape)
        kernel = tf.convert_to_tensor(self.cell.kernel)
        recurrent = tf.convert_to_tensor(self.cell.recurrent_kernel)
        n_in = x.shape[-1]
        # The input projection of all T steps in one matmul; only h @ U stays in the loop.
        xw = tf.einsum("tbf,fg->tbg", x, kernel[:n_in]) + tf.convert_to_tensor(self.cell.bias)
        time_row = kernel[n_in:] if self.use_time_step else None  # [1, 4H]

        def body(s, inputs):
            xwt, ft = inputs
            s = reset_where_first(s, ft)
            z = xwt + tf.matmul(s[0], recurrent)
            if self.use_time_step:
                z += (self.time_step_scale * s[2]) * time_row
            i, f, g, o = tf.split(z, 4, axis=-1)  # Keras LSTMCell gate order
            c = tf.sigmoid(f) * s[1] + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return (h, c, s[2] + 1.0) if self.use_time_step else (h, c)

        states = tf.scan(body, (xw, first), initializer=state)
        return states[0], tuple(s[-1] for s in states)


class CellCore(_Core):
    """A Keras RNN cell of one's own (``NetworkConfig.core="package.module:Name"``) as the
    network's core, with the LSTM core's contract: zeros as the initial state, reset to
    zeros where ``first``, a step and a ``[T, B]`` unroll (a ``tf.while_loop`` of steps).

    The cell (``keras.layers.LSTMCell`` / ``GRUCell``-like) gives ``state_size``, an int or a
    list of ints (one float32 ``[B, k]`` state tensor each), and ``call(x, states) -> (y,
    new_states)`` with ``x`` ``[B, F]`` (the torso's features, with the previous action and
    reward when ``use_prev_action`` / ``use_prev_reward``), ``states`` the list of state
    tensors, ``y`` ``[B, H]`` and ``new_states`` the same shapes as ``states`` (a list, or one
    tensor for a one-tensor state).
    """

    def __init__(self, cell: keras.layers.Layer, **kw):
        super().__init__(**kw)
        self.cell = cell
        size = getattr(cell, "state_size", None)
        sizes = [size] if isinstance(size, int) else list(size) if size is not None else None
        if not sizes or not all(isinstance(k, int) and k > 0 for k in sizes):
            raise ValueError(
                f"core: {type(cell).__name__}.state_size must be an int or a list of ints "
                f"(one [B, k] state tensor each), got {size!r}"
            )
        self._state_sizes = tuple(sizes)

    @property
    def state_sizes(self) -> tuple[int, ...]:
        """Last-dimension size of each state tensor (the cell's ``state_size``)."""
        return self._state_sizes

    def build(self, input_shape):
        """Builds the cell for inputs ``[..., F]``."""
        if not self.cell.built:
            self.cell.build((None, int(input_shape[-1])))
        self.built = True

    def _cell_step(self, x: tf.Tensor, state: tuple[tf.Tensor, ...]):
        y, new_state = self.cell(x, list(state))
        new_state = tuple(tf.cast(s, tf.float32) for s in tf.nest.flatten(new_state))
        if len(new_state) != len(state) or any(
            s.shape.rank != 2 or (s.shape[-1] is not None and s.shape[-1] != k)
            for s, k in zip(new_state, self.state_sizes)
        ):
            raise ValueError(
                f"core: {type(self.cell).__name__} returned states of shapes "
                f"{[s.shape.as_list() for s in new_state]}, expected [B, k] for k in "
                f"{list(self.state_sizes)} (its state_size)"
            )
        if y.shape.rank != 2:
            raise ValueError(
                f"core: {type(self.cell).__name__} returned an output of shape "
                f"{y.shape.as_list()}, expected [B, units]"
            )
        return tf.cast(y, tf.float32), new_state

    def unroll(
        self, x: tf.Tensor, first: tf.Tensor, state: tuple[tf.Tensor, ...]
    ) -> tuple[tf.Tensor, tuple[tf.Tensor, ...]]:
        """Unroll over time: x ``[T, B, F]``, first ``[T, B]`` -> (y ``[T, B, H]``, final
        state); ``step`` T times (T >= 1), gradients through the whole unroll (cut at resets)."""
        state = tuple(tf.convert_to_tensor(s) for s in state)
        if not self.built:
            self.build(x.shape)
        steps = tf.shape(x)[0]
        outputs = tf.TensorArray(tf.float32, size=steps)

        def body(t, outputs, state):
            y, state = self.step(x[t], first[t], state)
            return t + 1, outputs.write(t, y), state

        _, outputs, state = tf.while_loop(
            lambda t, *_: t < steps, body, (tf.constant(0), outputs, state)
        )
        return outputs.stack(), state
