"""SavedModel export of an actor-critic policy, loadable with plain TensorFlow.

The exported model needs neither this package nor TensorFlow Probability to load and run
(sampling is traced into graph ops), in the manner of TF-Agents' ``PolicySaver``::

    import numpy as np
    import tensorflow as tf

    policy = tf.saved_model.load(path)
    state = policy.get_initial_state(batch_size=tf.constant(B))
    out = policy.action(observation=obs, first=first, prev_action=prev_action,
                        prev_reward=prev_reward, state=state)
    out["action"], out["state"], out["value"], out["log_prob"]  # + the distribution params
    state = out["state"]
    policy.greedy_action(...)   # same inputs; the mode (argmax, loc, or squashed loc)
    policy.action_from_noise(..., noise=noise)   # a draw given its noise [B, A] (below)

Inputs (batch size B is dynamic): observation ``[B, *obs_shape]`` (the observation space's
dtype: float32, uint8, or int32 ids for Discrete spaces; a wrong shape or dtype is rejected;
for a Dict / Tuple space a dict / tuple of such tensors, e.g. ``observation={"image": ...,
"pos": ...}``), first ``[B]`` bool, prev_action ``[B]`` int32, ``[B, A]`` float32 (Box) or
``[B, D]`` int32 (MultiDiscrete, MultiBinary), prev_reward ``[B]``
float32, state a tuple of float32 ``[B, k]`` tensors. A feed-forward policy carries a dummy
state ``(zeros [B, 1],)`` passed through unchanged, so every policy is driven by one loop.

``action_from_noise`` takes the sampling noise as an input (float32 ``[B, A]``: uniform in
[0, 1) for a categorical policy, which it turns into a Gumbel-max draw, standard normal for the
Gaussian ones; ``tfagents_vtrace.export_portable``) and computes everything in plain TF ops:
it is the step that the LiteRT and ONNX artefacts carry, so the same noise gives the same
action in all three (:mod:`tfagents_vtrace.export_parity`).

Signatures with flat named tensors for TF Serving: ``serving_default`` (= ``action``),
``action``, ``greedy_action``, ``action_from_noise`` (inputs observation, first, prev_action,
prev_reward, state_0, state_1, ... [, noise], where a Dict / Tuple observation is one input
per leaf, ``observation_<key>`` / ``observation_<i>``; outputs action, value, log_prob, the
distribution parameters, q with a discrete Q head, state_0, ...) and ``get_initial_state``
(input batch_size; outputs state_0, ...). ``policy.metadata`` is a string variable holding
JSON: the network config, the spaces (for a Dict / Tuple observation,
``observation_shape`` and ``observation_dtype`` map each flat input name to its own),
``policy_kind``, ``nvec`` (MultiDiscrete), ``state_sizes``, ``noise_law`` and ``noise_size``.

:func:`export_tflite` and :func:`export_onnx` write the same policy as one LiteRT or ONNX
file (``tfagents_vtrace.export_litert``, ``tfagents_vtrace.export_onnx``); a policy with a
Dict / Tuple observation is refused there (SavedModel only). TAAC's policy is
not an actor-critic network: ``tfagents_vtrace.agents.taac.export`` (SavedModel) and
``tfagents_vtrace.agents.taac.portable`` (LiteRT, ONNX) write it.
"""

from __future__ import annotations

import json
import os

import numpy as np
import tensorflow as tf

from tfagents_vtrace import export_portable
from tfagents_vtrace.export_target import check_export_path, write_atomically
from tfagents_vtrace.networks import ActorCriticNetwork, NetInputs


def policy_metadata(network: ActorCriticNetwork) -> dict:
    """The JSON-able ``metadata`` of an exported policy (see the module docstring)."""
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
        "noise_law": export_portable.noise_law(network),
        "noise_size": export_portable.noise_size(network),
    }
    if network.nvec is not None:
        meta["nvec"] = list(network.nvec)
    if network.action_low is not None:
        meta["action_low"] = np.asarray(network.action_low).tolist()
        meta["action_high"] = np.asarray(network.action_high).tolist()
    return meta


class PolicyModule(tf.Module):
    """The exported object: the network's variables plus the acting ``tf.function``s.

    In process it is the exact twin of the loaded SavedModel (same traced functions, same
    inputs/outputs as in the module docstring), e.g. for benchmarks or an in-process actor:
    ``PolicyModule(net).action(observation=..., first=..., prev_action=..., prev_reward=...,
    state=...)``. ``action.python_function`` runs the same step eagerly.
    """

    def __init__(self, network: ActorCriticNetwork):
        super().__init__(name="policy")
        self.network = network
        self._recurrent = bool(network.state_sizes)
        self._state_sizes = tuple(network.state_sizes) or (1,)
        flat = export_portable.flat_input_specs(network)  # observation, ..., state_0, ...
        self._observation_spec = export_portable.observation_input_spec(network)
        n = len(tf.nest.flatten(self._observation_spec))
        self._flat_specs = flat[: n + 3]  # the observation's leaves, first, prev_*
        self._specs = [self._observation_spec, *flat[n : n + 3]]
        self._state_specs = tuple(flat[n + 3 :])
        self.metadata = tf.Variable(json.dumps(policy_metadata(network)), trainable=False)
        batch_spec = [tf.TensorSpec([], tf.int32, name="batch_size")]
        full_spec = [*self._specs, self._state_specs]
        self.get_initial_state = tf.function(self._initial_state, input_signature=batch_spec)
        self.action = tf.function(self._action, input_signature=full_spec)
        self.greedy_action = tf.function(self._greedy_action, input_signature=full_spec)
        self._noise_spec = export_portable.noise_spec(network)
        self.action_from_noise = tf.function(
            self._action_from_noise, input_signature=[*full_spec, self._noise_spec]
        )

    def _initial_state(self, batch_size):
        if self._recurrent:
            return tuple(self.network.initial_state(batch_size))
        return (tf.zeros([batch_size, 1], tf.float32),)

    def _step(self, observation, first, prev_action, prev_reward, state, greedy: bool):
        inputs = NetInputs(observation, first, prev_action, prev_reward)
        net_state = tuple(state) if self._recurrent else ()
        out = self.network(inputs, net_state)
        if greedy:
            action = self.network.greedy_action(out.policy)
        else:
            action = self.network.distribution(out.policy).sample()
        log_prob = self.network.distribution(out.policy).log_prob(action)
        result = {"action": action, "value": out.value, "log_prob": log_prob}
        result.update(out.policy)
        if out.q is not None:  # the discrete Q head's Q(s, .)
            result["q"] = out.q
        result["state"] = tuple(out.state) if self._recurrent else tuple(state)
        return result

    def _action(self, observation, first, prev_action, prev_reward, state):
        return self._step(observation, first, prev_action, prev_reward, state, greedy=False)

    def _greedy_action(self, observation, first, prev_action, prev_reward, state):
        return self._step(observation, first, prev_action, prev_reward, state, greedy=True)

    def _action_from_noise(self, observation, first, prev_action, prev_reward, state, noise):
        flat = [*tf.nest.flatten(observation), first, prev_action, prev_reward, *state]
        out = export_portable.portable_step(self.network, flat, noise)
        states = tuple(out.pop(f"state_{i}") for i in range(len(self._state_sizes)))
        return {**out, "state": states}

    def serving_signatures(self) -> dict:
        """Concrete functions with flat named inputs/outputs for TF Serving."""
        flat_spec = [*self._flat_specs, *self._state_specs]
        return flat_serving_signatures(
            self, flat_spec, self._noise_spec, observation=self._observation_spec
        )


def flat_serving_signatures(
    module: tf.Module,
    flat_spec: list[tf.TensorSpec],
    noise_spec: tf.TensorSpec | list[tf.TensorSpec] | None = None,
    observation=None,
) -> dict:
    """Serving signatures with flat named tensors for a policy module of the common contract.

    Args:
      module: has ``tf.function`` attributes ``action`` and ``greedy_action`` taking
        ``(observation, first, prev_action, prev_reward, state)`` (``state`` a tuple) and
        returning a dict whose ``"state"`` entry is a tuple, and ``get_initial_state(batch_size)``
        returning a tuple of states.
      flat_spec: the four input specs followed by one spec per state tensor (``state_0``, ...).
      noise_spec: when given, the module also has ``action_from_noise`` taking ``noise`` after
        ``state`` (a list of specs: several noise arguments in that order, e.g. TAAC's
        ``noise, b_noise``), exported as the ``action_from_noise`` signature.
      observation: a nest of specs when the observation is a Dict / Tuple: ``flat_spec``
        then starts with its leaves (``observation_<key>``), which are packed into it for
        the module's functions.

    Returns:
      ``{"serving_default", "action", "greedy_action", "get_initial_state"}`` (and
      ``"action_from_noise"``) concrete functions; ``state`` is flattened to ``state_0,
      state_1, ...`` in inputs and outputs. They call the module's traced functions (call
      ops), so nothing is traced twice.
    """

    def flatten(out: dict) -> dict:
        flat = {k: v for k, v in out.items() if k != "state"}
        flat.update({f"state_{i}": s for i, s in enumerate(out["state"])})
        return flat

    if observation is not None and not isinstance(observation, tf.TensorSpec):
        return _nested_serving_signatures(module, flat_spec, noise_spec, observation, flatten)

    def make(step_fn):
        def flat_fn(observation, first, prev_action, prev_reward, *states):
            return flatten(step_fn(observation, first, prev_action, prev_reward, tuple(states)))

        return tf.function(flat_fn, input_signature=flat_spec).get_concrete_function()

    action = make(module.action)
    signatures = {
        "serving_default": action,
        "action": action,
        "greedy_action": make(module.greedy_action),
        "get_initial_state": _initial_state_signature(module),
    }
    if noise_spec is not None:
        noise_specs = [noise_spec] if isinstance(noise_spec, tf.TensorSpec) else list(noise_spec)
        n = len(noise_specs)

        def from_noise(observation, first, prev_action, prev_reward, *rest):
            states, noises = tuple(rest[:-n]), rest[-n:]
            return flatten(
                module.action_from_noise(
                    observation, first, prev_action, prev_reward, states, *noises
                )
            )

        spec = [*flat_spec, *noise_specs]
        signatures["action_from_noise"] = tf.function(
            from_noise, input_signature=spec
        ).get_concrete_function()
    return signatures


def _initial_state_signature(module: tf.Module):
    """``get_initial_state(batch_size) -> {state_0, ...}``."""

    def init_flat(batch_size):
        return {f"state_{i}": s for i, s in enumerate(module.get_initial_state(batch_size))}

    spec = [tf.TensorSpec([], tf.int32, "batch_size")]
    return tf.function(init_flat, input_signature=spec).get_concrete_function()


def _nested_serving_signatures(module, flat_spec, noise_spec, observation, flatten) -> dict:
    """:func:`flat_serving_signatures` of a Dict / Tuple observation: the inputs are named by
    their specs (``observation_<key>, first, prev_action, prev_reward, state_0, ...``)."""
    n = len(tf.nest.flatten(observation))
    pack = lambda flat: tf.nest.pack_sequence_as(observation, list(flat[:n]))  # noqa: E731

    def make(step_fn, specs, noises: int = 0):
        def flat_fn(*flat):
            inputs = flat[: len(flat) - noises]
            rest = tuple(inputs[n + 3 :])
            extra = flat[len(flat) - noises :]
            return flatten(step_fn(pack(flat), *inputs[n : n + 3], rest, *extra))

        return tf.function(flat_fn, input_signature=specs).get_concrete_function()

    action = make(module.action, flat_spec)
    signatures = {
        "serving_default": action,
        "action": action,
        "greedy_action": make(module.greedy_action, flat_spec),
        "get_initial_state": _initial_state_signature(module),
    }
    if noise_spec is not None:
        noise_specs = [noise_spec] if isinstance(noise_spec, tf.TensorSpec) else list(noise_spec)
        signatures["action_from_noise"] = make(
            module.action_from_noise, [*flat_spec, *noise_specs], len(noise_specs)
        )
    return signatures


def export_policy(
    network: ActorCriticNetwork, path: str | os.PathLike, *, overwrite: bool = False
) -> str:
    """Writes ``network`` as a SavedModel policy at ``path`` (see the module docstring).

    The SavedModel is written beside ``path`` and renamed into place, so a failed save keeps
    the previous policy (:func:`tfagents_vtrace.export_target.write_atomically`).

    Args:
      network: a built :class:`ActorCriticNetwork` (``make_network`` output).
      path: output directory.
      overwrite: replace an existing SavedModel at ``path``.
    Returns:
      ``path`` as a string.
    Raises:
      ValueError: ``network`` is not an ActorCriticNetwork; ``path`` is a file, a symbolic
        link or a non-empty directory that is not a SavedModel (even with ``overwrite``), or
        a SavedModel and ``overwrite`` is False.
    """
    path = os.fspath(path)
    if not isinstance(network, ActorCriticNetwork):
        raise ValueError(f"network must be an ActorCriticNetwork, got {type(network).__name__}")
    check_export_path(path, overwrite)  # before anything is traced
    module = PolicyModule(export_portable.exported_network(network))

    def write(directory: str) -> None:
        tf.saved_model.save(module, directory, signatures=module.serving_signatures())

    return write_atomically(path, write, overwrite=overwrite)


def export_tflite(
    network: ActorCriticNetwork, path: str | os.PathLike, *, overwrite: bool = False
) -> str:
    """Writes ``network`` as one LiteRT (TFLite) file; see :mod:`tfagents_vtrace.export_litert`."""
    from tfagents_vtrace.export_litert import export_tflite as export

    return export(network, path, overwrite=overwrite)


def export_onnx(
    network: ActorCriticNetwork,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    opset: int = 17,
) -> str:
    """Writes ``network`` as one ONNX file; see :mod:`tfagents_vtrace.export_onnx`."""
    from tfagents_vtrace.export_onnx import export_onnx as export

    return export(network, path, overwrite=overwrite, opset=opset)
