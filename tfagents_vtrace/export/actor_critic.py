"""The exported policy of an :class:`~tfagents_vtrace.networks.ActorCriticNetwork` (IMPALA,
A2C, A3C, ACER): :class:`ActorCriticPolicy`, the :class:`~tfagents_vtrace.export.
policy_module.PolicyModule` those agents share.

Its ``action`` and ``greedy_action`` outputs are ``action``, ``value``, ``log_prob``, the
distribution parameters (``logits``; ``loc``, ``scale``; ...) and ``q`` with a discrete Q head
(ACER), and ``state``. ``metadata`` (:func:`policy_metadata`) holds the network config, the
spaces (for a Dict / Tuple observation, ``observation_shape`` and ``observation_dtype`` map
each flat input name to its own), ``policy_kind``, ``nvec`` (MultiDiscrete), ``state_sizes``,
``noise_law`` and ``noise_size``.

``action`` samples with TensorFlow Probability from the graph's own random ops, so no other
runtime can reproduce its draws. ``action_from_noise`` (:meth:`ActorCriticPolicy.noise_step`,
the step of the LiteRT and ONNX files) takes the sampling noise as an input instead, so a
caller (or a parity check) can reproduce a sample exactly in every format, and writes the
log-probabilities out in elementary ops (no TFP):

* categorical: ``noise`` ``[B, A]`` uniform in [0, 1); the Gumbel-max draw
  ``action = argmax(logits - log(-log(noise)))`` (Gumbel 1954; Maddison et al. 2014,
  https://arxiv.org/abs/1411.0030) has the law ``Categorical(logits)``;
  ``log_prob = log_softmax(logits)[action]``.
* gaussian: ``noise`` ``[B, A]`` standard normal; ``action = loc + scale * noise``;
  ``log_prob = sum_a -noise^2 / 2 - log(scale) - log(2 pi) / 2``.
* tanh_gaussian: ``x = loc + scale * noise``, ``action = mid + half_range * tanh(x)``;
  ``log_prob`` is the Gaussian's at ``x`` minus ``sum_a log(half_range) + log(1 - tanh(x)^2)``,
  with ``log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2 x))`` (as TFP's Tanh bijector).
* multi_categorical (MultiDiscrete): ``noise`` ``[B, sum(nvec)]`` uniform in [0, 1), one
  Gumbel-max draw per block of logits; ``log_prob`` sums the blocks' log-softmax entries.
* multi_binary (MultiBinary): ``noise`` ``[B, n]`` uniform in [0, 1);
  ``action = noise < sigmoid(logits)``; ``log_prob = sum a log s(l) + (1 - a) log s(-l)``.

The greedy step is ``greedy_action``'s: argmax, ``loc`` or ``mid + half_range * tanh(loc)``
(the noise-free draw), with ``log_prob`` of that action by the formulas above.

Every ``action`` output of a ``Box`` action space (sampled, greedy, from noise; SavedModel,
LiteRT and ONNX alike) is clipped to the space's bounds where it leaves the policy
(:func:`clip_to_bounds`), as the runtime clips before ``env.step``: a Gaussian's draw, and
its mean, can leave the box. ``log_prob`` stays that of the unclipped draw, the one the
learners score (training records the unclipped action and clips only what the environment
gets).

A network whose conv torso computes in bfloat16 only because this machine chose it is
exported as a float32 copy (:func:`exported_network`). A Dict / Tuple observation is one
input per leaf in the flat signatures and in the LiteRT and ONNX files; its ``action_mask``
entry, if any, masks the policy inside the network (``networks/action_masks.py``), so every
format's sampled and greedy actions keep to the allowed ones.
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import numpy as np
import tensorflow as tf

from tfagents_vtrace.export.policy_module import PolicyModule
from tfagents_vtrace.networks import ActorCriticNetwork, NetInputs, distributions

NOISE_LAWS = {
    "categorical": "uniform",
    "gaussian": "normal",
    "tanh_gaussian": "normal",
    "multi_categorical": "uniform",
    "multi_binary": "uniform",
}
_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
# network -> its float32 copy (exported_network); not an attribute: Keras would track it.
_FLOAT32_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def exported_network(network: ActorCriticNetwork) -> ActorCriticNetwork:
    """The network an export traces: ``network`` itself, or, when its conv torso computes in
    bfloat16 only because ``cnn_compute_dtype="auto"`` chose it on this machine, a float32
    copy with the same weights. An exported policy then does not depend on the ISA of the
    machine that wrote it (bfloat16 is several times slower than float32 on a CPU without
    AVX-512 BF16 or AMX); an explicit ``"bfloat16"`` is exported as it is."""
    config = network.config
    if config.cnn_compute_dtype != "auto" or network.cnn_compute_dtype == "float32":
        return network
    copy = _FLOAT32_COPIES.get(network)  # built once per network (a run exports often)
    if copy is None:
        config = dataclasses.replace(config, cnn_compute_dtype="float32")
        copy = ActorCriticNetwork(config, network.observation_space, network.action_space)
        _FLOAT32_COPIES[network] = copy
    copy.set_weights(network.get_weights())
    return copy


def noise_law(network: ActorCriticNetwork) -> str:
    """The noise law: "uniform" in [0, 1) (categorical policies) or standard "normal"."""
    return NOISE_LAWS[network.policy_kind]


def noise_size(network: ActorCriticNetwork) -> int:
    """Last dimension A of the ``[B, A]`` noise: the number of actions, the action dim, or
    ``sum(nvec)`` (MultiDiscrete)."""
    if network.nvec is not None:
        return sum(network.nvec)
    return network.num_actions if network.is_discrete else network.action_dim


def _mid_half(network: ActorCriticNetwork) -> tuple[tf.Tensor, tf.Tensor]:
    low, high = network.action_low, network.action_high
    return tf.constant((high + low) / 2.0), tf.constant((high - low) / 2.0)


def _gaussian_log_prob(z: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
    """log N(loc + scale z; loc, scale) summed over the last axis."""
    return tf.reduce_sum(-0.5 * tf.square(z) - tf.math.log(scale) - _HALF_LOG_2PI, axis=-1)


def _tanh_log_det(x: tf.Tensor, half: tf.Tensor) -> tf.Tensor:
    """log |d/dx (mid + half tanh x)| summed over the last axis, stable for large |x|."""
    log_cosh2 = 2.0 * (math.log(2.0) - x - tf.nn.softplus(-2.0 * x))
    return tf.reduce_sum(tf.math.log(half) + log_cosh2, axis=-1)


def act_from_noise(
    network: ActorCriticNetwork, policy: dict[str, tf.Tensor], noise: tf.Tensor | None
) -> tuple[tf.Tensor, tf.Tensor]:
    """(action, log_prob) of the draw that ``noise`` ``[B, A]`` selects (see the module
    docstring); ``noise=None`` gives the greedy action and its log-probability."""
    kind = network.policy_kind
    if kind in ("multi_categorical", "multi_binary"):
        return _vector_discrete_from_noise(network, policy, noise)
    if kind == "categorical":
        logits = policy["logits"]
        scores = logits if noise is None else logits - tf.math.log(-tf.math.log(noise))
        action = tf.argmax(scores, axis=-1, output_type=tf.int32)
        chosen = tf.one_hot(action, network.num_actions, dtype=tf.float32)
        return action, tf.reduce_sum(chosen * tf.nn.log_softmax(logits), axis=-1)
    loc, scale = policy["loc"], policy["scale"]
    z = tf.zeros_like(loc) if noise is None else noise
    x = loc if noise is None else loc + scale * noise
    log_prob = _gaussian_log_prob(z, scale)
    if kind == "gaussian":
        return tf.identity(x), log_prob
    mid, half = _mid_half(network)
    return mid + half * tf.tanh(x), log_prob - _tanh_log_det(x, half)


def clip_to_bounds(network: ActorCriticNetwork, action: tf.Tensor) -> tf.Tensor:
    """``action`` clipped to ``network``'s ``Box`` action bounds (other spaces: as it is).

    The same clip as the runtime's before ``env.step`` (:func:`tfagents_vtrace.envs.
    env_action`), so an exported policy's actions are actions of its space in every format.
    The bounds are numpy constants of the traced graph (an eager tensor would be a captured
    input, which tf2onnx leaves as an unfed graph input); an infinite bound is the float32
    maximum, which leaves a finite action as it is.
    """
    if network.action_low is None:
        return action
    big = np.finfo(np.float32).max
    low = np.nan_to_num(np.asarray(network.action_low, np.float32), neginf=-big, posinf=big)
    high = np.nan_to_num(np.asarray(network.action_high, np.float32), neginf=-big, posinf=big)
    return tf.clip_by_value(action, low, high)


def _vector_discrete_from_noise(network, policy, noise) -> tuple[tf.Tensor, tf.Tensor]:
    """(action ``[B, D]`` int32, log_prob) of MultiDiscrete / MultiBinary policies."""
    if network.policy_kind == "multi_binary":
        logits = policy[distributions.BERNOULLI_LOGITS]
        if noise is None:
            action = tf.cast(logits > 0.0, tf.int32)
        else:
            action = tf.cast(noise < tf.sigmoid(logits), tf.int32)
        bits = tf.cast(action, tf.float32)
        log_p = -bits * tf.nn.softplus(-logits) - (1.0 - bits) * tf.nn.softplus(logits)
        return action, tf.reduce_sum(log_p, axis=-1)
    logits = policy[distributions.MULTI_LOGITS]
    scores = logits if noise is None else logits - tf.math.log(-tf.math.log(noise))
    padded = distributions.padded_logits(scores, network.nvec)
    action = tf.argmax(padded, axis=-1, output_type=tf.int32)
    log_p = tf.nn.log_softmax(distributions.padded_logits(logits, network.nvec))
    chosen = tf.one_hot(action, max(network.nvec), dtype=tf.float32)
    return action, tf.reduce_sum(chosen * log_p, axis=[-2, -1])


def policy_metadata(network: ActorCriticNetwork) -> dict:
    """The JSON-able ``metadata`` of the exported policy of ``network`` (module docstring)."""
    obs, act = network.observation_spec, network.action_spec
    if isinstance(obs, tf.TensorSpec):
        obs_shape, obs_dtype = list(obs.shape), obs.dtype.name
    else:  # a Dict / Tuple space: by flat input name
        obs_shape = {s.name: list(s.shape) for s in tf.nest.flatten(obs)}
        obs_dtype = {s.name: s.dtype.name for s in tf.nest.flatten(obs)}
    meta = {
        "network_config": network.config.to_dict(),
        "observation_shape": obs_shape,
        "observation_dtype": obs_dtype,
        "action_shape": list(act.shape),
        "action_dtype": act.dtype.name,
        "is_discrete": network.is_discrete,
        "num_actions": network.num_actions,
        "policy_kind": network.policy_kind,
        "state_sizes": list(network.state_sizes) or [1],
        "recurrent": bool(network.state_sizes),
        "noise_law": noise_law(network),
        "noise_size": noise_size(network),
    }
    if network.nvec is not None:
        meta["nvec"] = list(network.nvec)
    if network.action_low is not None:
        meta["action_low"] = np.asarray(network.action_low).tolist()
        meta["action_high"] = np.asarray(network.action_high).tolist()
    return meta


class ActorCriticPolicy(PolicyModule):
    """The exported policy of ``network`` (module docstring).

    In process it is the exact twin of the loaded SavedModel (the same traced functions), e.g.
    for benchmarks or an in-process actor: ``ActorCriticPolicy(net).action(observation=...,
    first=..., prev_action=..., prev_reward=..., state=...)``.
    """

    def __init__(self, network: ActorCriticNetwork):
        act = network.action_spec
        batched = lambda s: tf.TensorSpec([None, *s.shape], s.dtype, name=s.name)  # noqa: E731
        super().__init__(
            "policy",
            policy_metadata(network),
            tf.nest.map_structure(batched, network.observation_spec),
            tf.TensorSpec([None, *act.shape], act.dtype, name="prev_action"),
            tuple(network.state_sizes) or (1,),  # feed-forward: a dummy state passed through
            [tf.TensorSpec([None, noise_size(network)], tf.float32, name="noise")],
        )
        self.network = network
        self._recurrent = bool(network.state_sizes)

    def initial_state(self, batch_size) -> tuple:
        if self._recurrent:
            return tuple(self.network.initial_state(batch_size))
        return (tf.zeros([batch_size, 1], tf.float32),)

    def _forward(self, observation, first, prev_action, prev_reward, state):
        """``(NetOutput, new state)``: the dummy feed-forward state passed through."""
        inputs = NetInputs(observation, first, prev_action, prev_reward)
        out = self.network(inputs, tuple(state) if self._recurrent else ())
        return out, tuple(out.state) if self._recurrent else tuple(tf.identity(s) for s in state)

    def step(self, observation, first, prev_action, prev_reward, state, greedy: bool) -> dict:
        """The SavedModel's ``action`` (sampled with TensorFlow Probability) or
        ``greedy_action``. A ``Box`` action is clipped to the action space's bounds, sampled
        or greedy (a Gaussian's draws and its mean are unbounded); ``log_prob`` is that of
        the unclipped draw, the one the learners score."""
        out, new_state = self._forward(observation, first, prev_action, prev_reward, state)
        distribution = self.network.distribution(out.policy)
        action = self.network.greedy_action(out.policy) if greedy else distribution.sample()
        return {**self._report(out, action, distribution.log_prob(action)), "state": new_state}

    def _report(self, out, action, log_prob) -> dict:
        """``action`` (clipped to a ``Box``'s bounds: :func:`clip_to_bounds`), ``value``,
        ``log_prob``, the distribution parameters and ``q`` of a forward pass ``out``: where
        every format's action leaves the policy."""
        action = clip_to_bounds(self.network, action)
        result = {"action": action, "value": out.value, "log_prob": log_prob, **out.policy}
        if out.q is not None:  # the discrete Q head's Q(s, .)
            result["q"] = out.q
        return result

    def _outputs(self, out, noise=None) -> dict:
        """:meth:`_report` of the draw that ``noise`` selects (greedy without it)."""
        return self._report(out, *act_from_noise(self.network, out.policy, noise))

    def noise_step(self, observation, first, prev_action, prev_reward, state, noise=None) -> dict:
        out, new_state = self._forward(observation, first, prev_action, prev_reward, state)
        return {**self._outputs(out, noise), "state": new_state}

    def steps_of_one_call(self, flat_inputs, noises) -> tuple[dict, dict]:
        """One forward pass: the greedy step differs in ``action`` and ``log_prob`` only."""
        out, new_state = self._forward(*self._unflatten(flat_inputs))
        greedy = self._outputs(out)
        sampled = self._outputs(out, *noises)
        sampled.update({f"state_{i}": s for i, s in enumerate(new_state)})
        return sampled, {k: greedy[k] for k in ("action", "log_prob")}


def as_policy_module(policy) -> PolicyModule:
    """``policy`` when it is a :class:`PolicyModule`; an :class:`ActorCriticPolicy` of its
    :func:`exported_network` when it is an :class:`ActorCriticNetwork`.

    Raises:
      ValueError: ``policy`` is neither.
    """
    if isinstance(policy, PolicyModule):
        return policy
    if isinstance(policy, ActorCriticNetwork):
        return ActorCriticPolicy(exported_network(policy))
    raise ValueError(
        f"network must be an ActorCriticNetwork or a PolicyModule, got {type(policy).__name__}"
    )
