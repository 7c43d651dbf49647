"""Acting policies: one batched step over all of an actor's environments per call.

IMPALA actors (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) run the current
policy on many environments at once. Two implementations share one interface:

* :class:`TFPolicy`: a private copy of the network and one compiled ``tf.function`` step
  (any torso, LSTM core, continuous actions). Each call pays the ``tf.function`` call
  overhead, so all environments go through one call.
* :class:`NumpyConvPolicy`: the same for feed-forward categorical policies on the valid-relu
  conv torsos (opt-in, ``policy_impl="numpy"``).
* :class:`NumpyMLPPolicy`: for MLP categorical policies (optionally with the LSTM core and
  previous action / reward inputs), the same forward pass in numpy, much cheaper per call
  than the compiled TF step at CartPole sizes (docs/results/implementation_choices.md). It
  reads the weights of the network's own layers; tests compare it with the TF network.
  Opt-in (``policy_impl="numpy"``), it also acts for a ``Dict`` / ``Tuple`` observation
  whose every leaf the multi-input torso flattens (or one-hot encodes) or encodes with a
  valid-relu conv torso (a board's planes), an ``action_mask`` entry applied to the logits
  as the network applies it: a board game's few numbers.

:class:`FastestPolicy` (``policy_impl="fastest"``) holds several of them for one
feed-forward network (numpy where it applies, the compiled TF step, the same under XLA): its
first calls take turns between them and time each where it runs, in the actor's own thread
beside the learner; it then acts with the one of the lowest median time per call and prints
the choice once. Which is faster depends on the CPU (bfloat16 and AMX make TensorFlow's
convolutions cheap, numpy's float32 is the same everywhere), the batch and what competes
for TensorFlow's thread pool (docs/results/pong.md).

All take and return numpy arrays: ``step(obs [B, ...], first [B], prev_action [B(, A)],
prev_reward [B], state) -> (action [B(, A)], policy params dict of [B, ...], new state)``,
and ``set_weights(list_of_numpy)`` in ``network.get_weights()`` order. Dict / Tuple
observations (a nest of arrays) act through :class:`TFPolicy` unless ``policy_impl`` opts in
to the numpy MLP policy; MultiDiscrete / MultiBinary actions always do.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import tensorflow as tf

from tfagents_vtrace.networks import NetInputs, action_masks, normalization, torsos
from tfagents_vtrace.runtime.config import POLICY_IMPLS

_NP_ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "linear": lambda x: x,
    None: lambda x: x,
}


class TFPolicy:
    """Compiled one-step policy over a batch of environments (see module docstring).

    Args:
      network: the actor's own network (an ``ActorCriticNetwork``); its weights are replaced
        by ``set_weights``.
      greedy: act with the distribution's mode instead of sampling.
      seed: seeds the stateless sampling (the same seed gives the same actions).
      jit_compile: compile the step with XLA.
    """

    def __init__(self, network, greedy: bool = False, seed: int = 0, jit_compile: bool = False):
        self.network = network
        self.greedy = greedy
        self._seed = int(seed)
        self._calls = 0
        self._step = tf.function(self._tf_step, jit_compile=jit_compile, autograph=False)

    def initial_state(self, batch_size: int) -> tuple[np.ndarray, ...]:
        """Zero recurrent state as numpy arrays (``()`` for feed-forward networks)."""
        return tuple(s.numpy() for s in self.network.initial_state(batch_size))

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights in ``network.get_weights()`` order."""
        self.network.set_weights(weights)

    def _tf_step(self, obs, first, prev_action, prev_reward, state, seed):
        out = self.network(NetInputs(obs, first, prev_action, prev_reward), state)
        if self.greedy:
            action = self.network.greedy_action(out.policy)
        elif "logits" in out.policy:
            logits = out.policy["logits"]
            action = tf.random.stateless_categorical(logits, 1, seed, dtype=tf.int32)[:, 0]
        else:
            action = self.network.distribution(out.policy).sample(seed=seed)
        return action, out.policy, out.state

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step; returns numpy ``(action, policy_params, new_state)``."""
        self._calls += 1
        # int32: tfp's samplers (continuous actions) reject int64 seeds.
        seed = np.array([self._seed % 2**31, self._calls % 2**31], np.int32)
        action, policy, new_state = self._step(
            obs, first, prev_action, prev_reward, tuple(state), seed
        )
        return (
            action.numpy(),
            {k: v.numpy() for k, v in policy.items()},
            tuple(s.numpy() for s in new_state),
        )


class NumpyMLPPolicy:
    """Numpy forward pass of a categorical network on the MLP torso, or on the multi-input
    torso of a ``Dict`` / ``Tuple`` observation whose every leaf is flattened, one-hot
    encoded or encoded by a valid-relu conv torso (a ``nature_cnn``, ``small_atari_cnn`` or
    ``minatar_cnn`` encoder, e.g. a board's planes), optionally with the LSTM core and the
    previous action / reward inputs (see module docstring)."""

    def __init__(self, network, greedy: bool = False, seed: int = 0):
        if not self.supports(network, nested=True):
            raise ValueError(
                "network: NumpyMLPPolicy needs a categorical network on the MLP torso, or on "
                "a Dict / Tuple observation's multi-input torso whose leaves are flattened, "
                "one-hot encoded or encoded by nature_cnn / small_atari_cnn / minatar_cnn "
                "encoders"
            )
        self.greedy = greedy
        self._rng = np.random.default_rng(seed)
        cfg = network.config
        self._act = _NP_ACTIVATIONS[cfg.mlp_activation]
        self._prev_action = cfg.use_prev_action
        self._prev_reward = cfg.use_prev_reward
        self._num_actions = network.num_actions
        self._eye = np.eye(self._num_actions, dtype=np.float32)  # one-hot rows, built once
        self._lstm = network.core is not None
        index = {id(v): i for i, v in enumerate(network.weights)}
        # A nested observation: per leaf, (one-hot rows or None, scale) when flattened, or
        # (conv strides, scale) when a conv encoder takes it (its weights first in _w).
        self._leaves = None
        variables = []
        if _numpy_nested(network):
            self._leaves = []
            for e in network.torso.encoders:
                if isinstance(e, torsos.ConvTorso):
                    self._leaves.append(([int(c.strides[0]) for c in e.convs],
                                         np.float32(e.input_scale or 1.0)))  # fmt: skip
                    variables += [v for c in e.convs for v in (c.kernel, c.bias)]
                    variables += [e.dense.kernel, e.dense.bias]
                    continue
                cats = e.num_categories
                eye = None if cats is None else np.eye(cats, dtype=np.float32)
                self._leaves.append((eye, np.float32(e.input_scale)))
            dense = network.torso.mlp.dense_layers
        else:
            dense = network.torso.dense_layers
        self._num_encoder_weights = len(variables)
        variables += [v for d in dense for v in (d.kernel, d.bias)]
        if self._lstm:
            cell = network.core.cell
            variables += [cell.kernel, cell.recurrent_kernel, cell.bias]
            self._units = int(network.core.units)
        head = network.policy_head.logits
        variables += [head.kernel, head.bias]
        self._index = [index[id(v)] for v in variables]
        norm = getattr(network, "observation_normalizers", {}).get("0")
        self._norm_index = [] if norm is None else [index[id(norm.mean)], index[id(norm.var)]]
        self._clip = None if norm is None else np.float32(norm.clip)
        self._num_dense = len(dense)
        self._input_scale = np.float32(getattr(network, "input_scale", 1.0))
        self.set_weights(network.get_weights())

    @staticmethod
    def supports(network, nested: bool = False) -> bool:
        """True for an MLP torso on float or uint8 Box observations (with ``nested``: or a
        ``Dict`` / ``Tuple`` one of flattened or valid-relu conv-encoded leaves, module
        docstring), a categorical head, no Q head, and either no core or an LSTM core
        without the time-step input."""
        cfg = getattr(network, "config", None)
        core = getattr(network, "core", None)
        plain = _plain_observation(network) and network.observation_spec.dtype in (
            tf.float32,
            tf.uint8,
        )
        return bool(
            cfg is not None
            and cfg.core in (None, "lstm")
            and not (cfg.core == "lstm" and (cfg.use_time_step or core is None))
            and cfg.q_head is None
            and getattr(network, "policy_kind", None) == "categorical"
            and getattr(network, "obs_categories", None) is None
            and ((plain and cfg.torso == "mlp") or (nested and _numpy_nested(network)))
            and cfg.mlp_activation in _NP_ACTIVATIONS
        )

    def initial_state(self, batch_size: int) -> tuple:
        """``(h, c)`` zeros ``[B, units]`` with an LSTM core, else ``()``."""
        if not self._lstm:
            return ()
        zeros = np.zeros((batch_size, self._units), np.float32)
        return (zeros, zeros.copy())

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights in ``network.get_weights()`` order (a conv encoder's kernels
        flattened to matrices, :func:`_conv_matrices`)."""
        w = [np.asarray(weights[i], np.float32) for i in self._index]
        n_enc = self._num_encoder_weights
        encoders, self._w = w[:n_enc], w[n_enc:]
        self._encoder_w = []
        for leaf in self._leaves or ():
            if isinstance(leaf[0], list):  # a conv encoder's convs, then its dense layer
                n = 2 * len(leaf[0])
                self._encoder_w.append((_conv_matrices(encoders[:n]), encoders[n : n + 2]))
                encoders = encoders[n + 2 :]
            else:
                self._encoder_w.append(None)
        if self._norm_index:  # the observation's running mean and 1/std, as the network's
            mean, var = (np.asarray(weights[i], np.float32) for i in self._norm_index)
            self._norm = (mean, 1.0 / np.sqrt(var + np.float32(normalization.EPSILON)))

    def _flattened(self, obs) -> np.ndarray:
        """``[B, F]``: a nested observation's leaves encoded (flattened, one-hot, or through
        their conv encoder) and concatenated in ``tf.nest.flatten`` order, its
        ``action_mask`` left out, as the torso does."""
        leaves = tf.nest.flatten(action_masks.without_mask(obs))
        parts = []
        for x, (how, scale), conv in zip(leaves, self._leaves, self._encoder_w):
            x = np.asarray(x)
            if conv is not None:  # a grid leaf's conv encoder
                x = x.astype(np.float32) * scale if scale != 1.0 else x.astype(np.float32)
                parts.append(_conv_features(x, conv[0], how, conv[1]))
                continue
            if how is not None:  # a Discrete leaf's ids, one-hot
                parts.append(how[x.astype(np.int64)])
                continue
            x = x.astype(np.float32).reshape(len(x), -1)
            parts.append(x * scale if scale != 1.0 else x)
        return np.concatenate(parts, axis=-1) if len(parts) > 1 else parts[0]

    def _features(self, obs, first, prev_action, prev_reward, state):
        w, n = self._w, self._num_dense
        if self._leaves is not None:
            h = self._flattened(obs)
        else:
            h = np.asarray(obs, np.float32)
            if self._norm_index:
                mean, inv_std = self._norm
                h = np.clip((h - mean) * inv_std, -self._clip, self._clip)
            h = h.reshape(len(obs), -1)
            if self._input_scale != 1.0:  # e.g. 1/255 for uint8 images, as the network does
                h = h * self._input_scale
        for k in range(n):
            h = self._act(h @ w[2 * k] + w[2 * k + 1])
        if not self._lstm:
            return h, ()
        keep = 1.0 - np.asarray(first, np.float32)[:, None]
        parts = [h]
        if self._prev_action:
            onehot = self._eye[np.asarray(prev_action)]
            parts.append(onehot * keep)
        if self._prev_reward:
            parts.append(np.asarray(prev_reward, np.float32)[:, None] * keep)
        x = np.concatenate(parts, axis=-1) if len(parts) > 1 else h
        h_prev, c_prev = state[0] * keep, state[1] * keep
        z = x @ w[2 * n] + h_prev @ w[2 * n + 1] + w[2 * n + 2]
        i, f, g, o = np.split(z, 4, axis=-1)
        c = _sigmoid(f) * c_prev + _sigmoid(i) * np.tanh(g)
        h = _sigmoid(o) * np.tanh(c)
        return h, (h, c)

    def _logits(self, h: np.ndarray, obs) -> np.ndarray:
        """The head's logits of features ``h``, masked by ``obs``'s ``action_mask`` if any
        (``networks/action_masks.py``)."""
        logits = h @ self._w[-2] + self._w[-1]
        if isinstance(obs, dict) and action_masks.MASK_KEY in obs:
            allowed = np.asarray(obs[action_masks.MASK_KEY]) > 0
            logits = np.where(allowed, logits, np.float32(action_masks.MASKED_LOGIT))
        return logits

    def logits(self, obs, first=None, prev_action=None, prev_reward=None, state=()):
        """Policy logits ``[B, A]`` (and the new state) of one step's inputs."""
        batch = len(tf.nest.flatten(obs)[0])
        if first is None:
            first = np.ones(batch, bool)
        if self._lstm and not state:
            state = self.initial_state(batch)
        h, new_state = self._features(obs, first, prev_action, prev_reward, state)
        out = self._logits(h, obs)
        return (out, new_state) if self._lstm else out

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step; returns numpy ``(action, {"logits": ...}, new_state)``."""
        h, new_state = self._features(obs, first, prev_action, prev_reward, state)
        logits = self._logits(h, obs)
        if self.greedy:
            action = np.argmax(logits, axis=-1)
        else:  # Gumbel-max sampling
            u = self._rng.random(logits.shape, dtype=np.float32)
            action = np.argmax(logits - np.log(-np.log(u + 1e-20) + 1e-20), axis=-1)
        return action.astype(np.int32), {"logits": logits}, new_state


class NumpyConvPolicy:
    """Numpy forward pass of a feed-forward categorical network on a conv torso of valid
    relu convolutions and a relu dense layer ("nature_cnn", "small_atari_cnn",
    "minatar_cnn"), float32 whatever ``cnn_compute_dtype`` the learner uses. Each conv is an
    im2col matmul over strided windows. Off TensorFlow, the actor's few-observation forward
    pass no longer queues behind the learner's ops in the process's TensorFlow thread pool
    (docs/results/implementation_choices.md)."""

    TORSOS = ("nature_cnn", "small_atari_cnn", "minatar_cnn")

    def __init__(self, network, greedy: bool = False, seed: int = 0):
        if not self.supports(network):
            raise ValueError(
                "network: NumpyConvPolicy needs a feed-forward categorical network on one of "
                f"the torsos {self.TORSOS}"
            )
        self.greedy = greedy
        self._rng = np.random.default_rng(seed)
        torso = network.torso
        index = {id(v): i for i, v in enumerate(network.weights)}
        variables = [v for c in torso.convs for v in (c.kernel, c.bias)]
        variables += [torso.dense.kernel, torso.dense.bias]
        head = network.policy_head.logits
        variables += [head.kernel, head.bias]
        self._index = [index[id(v)] for v in variables]
        self._strides = [int(c.strides[0]) for c in torso.convs]
        self._input_scale = np.float32(getattr(network, "input_scale", 1.0))
        self.set_weights(network.get_weights())

    @classmethod
    def supports(cls, network) -> bool:
        """True for a conv torso of :attr:`TORSOS`, no core, no previous action / reward
        inputs, a categorical head, no Q head, uint8 or float32 ``[H, W, C]`` observations
        that are not normalised."""
        cfg = getattr(network, "config", None)
        return bool(
            cfg is not None
            and cfg.torso in cls.TORSOS
            and not getattr(network, "observation_normalizers", None)
            and cfg.core is None
            and cfg.q_head is None
            and not (cfg.use_prev_action or cfg.use_prev_reward)
            and getattr(network, "policy_kind", None) == "categorical"
            and _plain_observation(network)
            and network.observation_spec.dtype in (tf.float32, tf.uint8)
        )

    def initial_state(self, batch_size: int) -> tuple:
        """``()``: feed-forward."""
        return ()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights in ``network.get_weights()`` order (conv kernels are flattened to
        ``[k * k * C_in, C_out]`` matrices here, once per weight update)."""
        w = [np.asarray(weights[i], np.float32) for i in self._index]
        n = len(self._strides)
        self._convs = _conv_matrices(w[: 2 * n])
        self._dense = w[2 * n : 2 * n + 2]
        self._head = w[2 * n + 2 : 2 * n + 4]

    def logits(self, obs) -> np.ndarray:
        """Policy logits ``[B, A]`` of observations ``[B, H, W, C]``."""
        x = np.asarray(obs, np.float32)
        if self._input_scale != 1.0:  # 1/255 for uint8 images, as the network does
            x = x * self._input_scale
        x = _conv_features(x, self._convs, self._strides, self._dense)
        return x @ self._head[0] + self._head[1]

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step; returns numpy ``(action, {"logits": ...}, ())``."""
        logits = self.logits(obs)
        if self.greedy:
            action = np.argmax(logits, axis=-1)
        else:  # Gumbel-max sampling
            u = self._rng.random(logits.shape, dtype=np.float32)
            action = np.argmax(logits - np.log(-np.log(u + 1e-20) + 1e-20), axis=-1)
        return action.astype(np.int32), {"logits": logits}, ()


class FastestPolicy:
    """Acts with each of ``candidates`` in turn for its first calls, then with the fastest
    (module docstring).

    Args:
      candidates: ``{name: policy}`` of feed-forward policies of one network (same
        ``step`` / ``set_weights`` interface).
      warmup: calls of each candidate not timed (tracing, compilation, caches).
      trials: timed calls of each candidate.
      label: names the owner in the printed choice (e.g. ``"actor 0"``).
    """

    def __init__(self, candidates: dict, warmup: int = 3, trials: int = 15, label: str = ""):
        if not candidates:
            raise ValueError("candidates: expected at least one policy")
        self.candidates = dict(candidates)
        self.warmup, self.trials, self.label = int(warmup), int(trials), label
        self.chosen: str | None = None if len(candidates) > 1 else next(iter(candidates))
        self.times: dict[str, list[float]] = {name: [] for name in candidates}
        self._calls = 0
        self._batch = 0

    @property
    def greedy(self) -> bool:
        return next(iter(self.candidates.values())).greedy

    def initial_state(self, batch_size: int) -> tuple:
        """``()``: feed-forward."""
        return ()

    def set_weights(self, weights: list[np.ndarray]) -> None:
        """Loads weights into the chosen policy (into every candidate before the choice)."""
        names = self.candidates if self.chosen is None else (self.chosen,)
        loaded = set()
        for name in names:
            policy = self.candidates[name]
            key = id(getattr(policy, "network", policy))  # TF candidates share a network
            if key not in loaded:
                policy.set_weights(weights)
                loaded.add(key)

    def step(self, obs, first, prev_action, prev_reward, state):
        """One batched step of the chosen policy, or of the candidate whose turn it is."""
        if self.chosen is not None:
            return self.candidates[self.chosen].step(obs, first, prev_action, prev_reward, state)
        names = list(self.candidates)
        name = names[self._calls % len(names)]
        self._calls += 1
        self._batch = len(first)
        start = time.perf_counter()
        out = self.candidates[name].step(obs, first, prev_action, prev_reward, state)
        if self._calls > self.warmup * len(names):
            self.times[name].append(time.perf_counter() - start)
            if all(len(t) >= self.trials for t in self.times.values()):
                self._choose()
        return out

    def _choose(self) -> None:
        medians = {name: float(np.median(t)) for name, t in self.times.items()}
        self.chosen = min(medians, key=medians.get)
        per_step = lambda name: 1e3 * medians[name] / max(self._batch, 1)  # noqa: E731
        others = ", ".join(f"{n} {per_step(n):.3f}" for n in medians if n != self.chosen)
        who = f"{self.label}: " if self.label else ""
        print(
            f"{who}policy_impl fastest -> {self.chosen} ({per_step(self.chosen):.3f} ms per "
            f"agent step at {self._batch} observations per call; {others})",
            file=sys.stderr,
            flush=True,
        )


def numpy_policy_class(network, impl: str):
    """The numpy policy class that acts for ``network`` under ``policy_impl=impl``, or None:
    "auto" takes :class:`NumpyMLPPolicy` where it applies to a plain observation; "numpy"
    also to a nested one, and :class:`NumpyConvPolicy` (opt-in: it changes a run's sampling
    stream)."""
    if impl == "tf":
        return None
    opted_in = impl in ("numpy", "fastest")
    if NumpyMLPPolicy.supports(network, nested=opted_in):
        return NumpyMLPPolicy
    if opted_in and NumpyConvPolicy.supports(network):
        return NumpyConvPolicy
    return None


IMPLS = POLICY_IMPLS
"""The ``policy_impl`` values (:func:`make_policy`), ``RunConfig``'s."""


def _plain_observation(network) -> bool:
    """One observation array (not a Dict / Tuple nest, which the TF policy takes)."""
    return isinstance(network.observation_spec, tf.TensorSpec)


def _numpy_nested(network) -> bool:
    """A ``Dict`` / ``Tuple`` observation whose multi-input torso flattens (or one-hot
    encodes) every leaf, or encodes it with a conv torso of :attr:`NumpyConvPolicy.TORSOS`'
    kind (valid relu convolutions, a relu dense layer), with no running normalisation."""
    from tfagents_vtrace.networks.multi_input import MultiInputTorso

    torso = getattr(network, "torso", None)
    numpy_conv = (torsos.NatureCNN, torsos.SmallAtariCNN, torsos.MinAtarCNN)
    return (
        isinstance(torso, MultiInputTorso)
        and all(
            (isinstance(e, torsos.MLPTorso) and not e.dense_layers)
            or (isinstance(e, numpy_conv) and e.dense is not None)
            for e in torso.encoders
        )
        and not getattr(network, "observation_normalizers", {})
    )


def _conv_matrices(weights: list[np.ndarray]) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """``(k, [k * k * C_in, C_out] kernel, bias)`` per conv of ``weights`` (kernel, bias,
    kernel, bias, ... in Keras's ``[k, k, C_in, C_out]`` layout)."""
    return [
        (weights[i].shape[0], weights[i].reshape(-1, weights[i].shape[-1]), weights[i + 1])
        for i in range(0, len(weights), 2)
    ]


def _conv_features(x: np.ndarray, convs, strides, dense) -> np.ndarray:
    """``[B, D]`` of float32 ``[B, H, W, C]`` images: valid relu convolutions (each an
    im2col matmul over strided windows), flatten, relu dense ``(kernel, bias)``."""
    for (k, kernel, bias), s in zip(convs, strides):
        b, h, w, c = x.shape
        ho, wo = (h - k) // s + 1, (w - k) // s + 1
        # [B, Ho, Wo, k, k, C] windows (kernel layout [k, k, C_in, C_out]), copied once
        sb, sh, sw, sc = x.strides
        win = np.lib.stride_tricks.as_strided(
            x, (b, ho, wo, k, k, c), (sb, sh * s, sw * s, sh, sw, sc), writeable=False
        )
        x = np.maximum(win.reshape(b * ho * wo, -1) @ kernel + bias, 0.0)
        x = x.reshape(b, ho, wo, -1)
    return np.maximum(x.reshape(len(x), -1) @ dense[0] + dense[1], 0.0)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def make_policy(network, impl: str = "auto", greedy: bool = False, seed: int = 0, label: str = ""):
    """``impl``: "tf"; "auto" (numpy for MLP categorical [+ LSTM] networks, else TF);
    "numpy" (MLP categorical [+ LSTM], or a feed-forward categorical conv network of
    :attr:`NumpyConvPolicy.TORSOS`; ValueError naming ``policy_impl`` for others); or
    "fastest" (:class:`FastestPolicy` over numpy where it applies, TF and TF under XLA, for a
    feed-forward network; "auto" for a recurrent one). ``label`` names the owner in what
    "fastest" prints."""
    if impl not in IMPLS:
        raise ValueError(f"policy_impl: expected one of {IMPLS}, received {impl!r}")
    if impl == "fastest":
        if network.initial_state(1):  # recurrent: the candidates' states differ
            return make_policy(network, "auto", greedy, seed)
        candidates = {}
        cls = numpy_policy_class(network, impl)
        if cls is not None:
            candidates["numpy"] = cls(network, greedy=greedy, seed=seed)
        candidates["tf"] = TFPolicy(network, greedy=greedy, seed=seed)
        candidates["xla"] = TFPolicy(network, greedy=greedy, seed=seed, jit_compile=True)
        return FastestPolicy(candidates, label=label)
    cls = numpy_policy_class(network, impl)
    if cls is not None:
        return cls(network, greedy=greedy, seed=seed)
    if impl == "numpy":
        raise ValueError(
            "policy_impl: 'numpy' needs a categorical policy on an MLP torso (optionally with "
            "the LSTM core; for a Dict / Tuple observation, every leaf flattened, one-hot "
            "encoded or encoded by a nature_cnn / small_atari_cnn / minatar_cnn encoder, and "
            f"no observation normalisation) or a feed-forward one on {NumpyConvPolicy.TORSOS}; "
            "use 'tf' or 'auto' for this network"
        )
    return TFPolicy(network, greedy=greedy, seed=seed)
