"""A policy step in plain TensorFlow ops, frozen for the LiteRT and ONNX converters.

The SavedModel's ``action`` samples with TensorFlow Probability from the graph's own random
ops, so no other runtime can reproduce its draws. The steps here take the sampling noise as
an input instead, so a caller (or a parity check) can reproduce a sample exactly in every
format, and write the log-probabilities out in elementary ops (no TFP):

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

The greedy step is the SavedModel's: argmax, ``loc`` or ``mid + half_range * tanh(loc)``
(the noise-free draw), with ``log_prob`` of that action by the formulas above.

Both steps take and return the flat tensors of the SavedModel's serving signatures
(``observation, first, prev_action, prev_reward, state_0, ...`` -> ``action, value,
log_prob``, the distribution parameters, ``q`` with a discrete Q head, ``state_0, ...``);
:func:`portable_functions` gives them as frozen concrete functions (weights folded into
constants), ready for ``tf.lite``.
"""

from __future__ import annotations

import dataclasses
import math
import weakref

import tensorflow as tf

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


def check_single_observation(network: ActorCriticNetwork, what: str) -> None:
    """Raises ValueError naming ``network`` when its observation is a Dict / Tuple nest:
    the LiteRT and ONNX artefacts (and their parity check) take one observation array."""
    if not isinstance(network.observation_spec, tf.TensorSpec):
        raise ValueError(
            f"network: {what} export takes one observation array, this policy's observation "
            "is a Dict / Tuple space; export it as a SavedModel"
        )


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


def observation_input_spec(network: ActorCriticNetwork):
    """The batched ``observation`` input: one spec, or a nest of ``observation_<key>`` specs
    (a Dict / Tuple observation space)."""
    batched = lambda s: tf.TensorSpec([None, *s.shape], s.dtype, name=s.name)  # noqa: E731
    return tf.nest.map_structure(batched, network.observation_spec)


def flat_input_specs(network: ActorCriticNetwork) -> list[tf.TensorSpec]:
    """observation, first, prev_action, prev_reward, state_0, ... (as the SavedModel's); a
    Dict / Tuple observation gives one input per leaf, ``observation_<key>``, in
    ``tf.nest.flatten`` order."""
    act = network.action_spec
    specs = [
        *tf.nest.flatten(observation_input_spec(network)),
        tf.TensorSpec([None], tf.bool, name="first"),
        tf.TensorSpec([None, *act.shape], act.dtype, name="prev_action"),
        tf.TensorSpec([None], tf.float32, name="prev_reward"),
    ]
    sizes = tuple(network.state_sizes) or (1,)  # feed-forward: a dummy state passed through
    specs += [tf.TensorSpec([None, k], tf.float32, name=f"state_{i}") for i, k in enumerate(sizes)]
    return specs


def noise_spec(network: ActorCriticNetwork) -> tf.TensorSpec:
    """The ``[None, A]`` float32 ``noise`` input of the sampling step."""
    return tf.TensorSpec([None, noise_size(network)], tf.float32, name="noise")


def forward(network: ActorCriticNetwork, flat_inputs) -> tuple:
    """The network on flat inputs (:func:`flat_input_specs`): ``(NetOutput, new states)``,
    the dummy feed-forward state passed through."""
    n = len(tf.nest.flatten(network.observation_spec))
    observation = tf.nest.pack_sequence_as(network.observation_spec, list(flat_inputs[:n]))
    first, prev_action, prev_reward, *state = flat_inputs[n:]
    recurrent = bool(network.state_sizes)
    out = network(
        NetInputs(observation, first, prev_action, prev_reward), tuple(state) if recurrent else ()
    )
    return out, list(out.state) if recurrent else [tf.identity(s) for s in state]


def outputs(network: ActorCriticNetwork, out, noise=None) -> dict:
    """``action, value, log_prob``, the distribution parameters and ``q`` of a forward pass."""
    action, log_prob = act_from_noise(network, out.policy, noise)
    result = {"action": action, "value": out.value, "log_prob": log_prob, **out.policy}
    if out.q is not None:
        result["q"] = out.q
    return result


def portable_step(network: ActorCriticNetwork, flat_inputs, noise=None) -> dict:
    """One flat step in plain TF ops: ``flat_inputs`` as :func:`flat_input_specs`; returns
    the dict of the module docstring (greedy when ``noise`` is None)."""
    out, new_state = forward(network, flat_inputs)
    result = outputs(network, out, noise)
    result.update({f"state_{i}": s for i, s in enumerate(new_state)})
    return result


def traced_functions(network: ActorCriticNetwork) -> dict:
    """``{"greedy_action", "action"}`` concrete functions of :func:`portable_step` (``action``
    takes ``noise`` after the state tensors); they read the network's variables."""
    specs = flat_input_specs(network)

    def greedy(*flat):
        return portable_step(network, flat)

    def sample(*flat):
        return portable_step(network, flat[:-1], noise=flat[-1])

    return {
        "greedy_action": tf.function(greedy, input_signature=specs).get_concrete_function(),
        "action": tf.function(
            sample, input_signature=[*specs, noise_spec(network)]
        ).get_concrete_function(),
    }


def freeze(function):
    """A concrete function with the same flat named inputs and dict outputs whose variables
    are folded into constants.

    The LiteRT converter needs it: from a SavedModel whose signatures read Keras variables,
    ``tf.lite`` (TF 2.21) keeps ``READ_VARIABLE`` ops that nothing initialises, and the
    model returns NaN. (tf2onnx freezes the functions it is given itself.)
    """
    from tensorflow.python.framework import convert_to_constants  # the converters' own

    frozen = convert_to_constants.convert_variables_to_constants_v2(function)
    names = sorted(function.structured_outputs)  # the flattening order of a dict
    specs = list(function.structured_input_signature[0])  # the named TensorSpecs

    def call(*flat):
        return dict(zip(names, frozen(*flat)))

    return tf.function(call, input_signature=specs).get_concrete_function()


def portable_functions(network: ActorCriticNetwork) -> dict:
    """Frozen ``{"greedy_action", "action"}`` concrete functions (see the module docstring)."""
    return {k: freeze(f) for k, f in traced_functions(network).items()}
