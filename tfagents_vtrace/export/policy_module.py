"""The policy-module protocol: what every agent's exported policy is, whatever its network.

An exported policy is a ``tf.Module`` that loads with plain TensorFlow, in the manner of
TF-Agents' ``PolicySaver`` (https://www.tensorflow.org/agents/api_docs/python/tf_agents/policies/PolicySaver)::

    policy = tf.saved_model.load(path)
    state = policy.get_initial_state(batch_size=tf.constant(B))
    out = policy.action(observation=obs, first=first, prev_action=prev_action,
                        prev_reward=prev_reward, state=state)
    out["action"], out["value"], out["state"]   # + what the policy reports
    policy.greedy_action(...)                   # same inputs: the policy's mode
    policy.action_from_noise(..., noise=noise)  # a draw given its noise (below)

Inputs (batch size B is dynamic): ``observation`` ``[B, *obs_shape]`` (or a dict / tuple of
such tensors for a Dict / Tuple space), ``first`` ``[B]`` bool (the step starts an episode:
the policy resets its state there), ``prev_action`` and ``prev_reward`` ``[B]`` float32 (zeros
at ``first``), and ``state``, a tuple of float32 ``[B, k]`` tensors that the previous call
returned; a policy without state carries a dummy ``(zeros [B, 1],)`` passed through, so every
policy is driven by one loop (Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561, steps a recurrent policy this way).

``action_from_noise`` takes the sampling noise as inputs (``noise_specs``: the laws are in
``metadata``) and computes everything in plain TF ops: it is the step the LiteRT and ONNX
artefacts carry (:mod:`tfagents_vtrace.export.litert`, :mod:`tfagents_vtrace.export.onnx`),
so the same noise gives the same action in every format (:mod:`tfagents_vtrace.export.parity`).

:class:`PolicyModule` builds these ``tf.function`` s and the flat serving signatures from what
a subclass supplies: :meth:`~PolicyModule.initial_state`, :meth:`~PolicyModule.step` (the
sampled or greedy step, free to use random ops) and :meth:`~PolicyModule.noise_step` (the
step given its noise, plain ops). The actor-critic agents share
:class:`tfagents_vtrace.export.actor_critic.ActorCriticPolicy`; an agent whose policy is not an
actor-critic network supplies its own subclass (TAAC's is in ``tfagents_vtrace.agents.taac``).

Serving signatures (:meth:`~PolicyModule.serving_signatures`, for TF Serving) take flat named
tensors: ``serving_default`` (= ``action``), ``action``, ``greedy_action``,
``action_from_noise`` (inputs observation, first, prev_action, prev_reward, state_0, state_1,
... and the noise inputs, a Dict / Tuple observation being one input per leaf,
``observation_<key>``; outputs the step's dict with ``state`` flattened to ``state_0, ...``)
and ``get_initial_state`` (input batch_size; outputs state_0, ...). ``metadata`` is a string
variable holding the policy's JSON description.
"""

from __future__ import annotations

import json

import tensorflow as tf


class PolicyModule(tf.Module):
    """An exported policy (see the module docstring); subclasses supply the steps.

    Args:
      name: the module's name.
      metadata: the JSON-able description stored in ``metadata``.
      observation_spec: the batched ``observation`` input: a ``TensorSpec`` named
        "observation", or a nest of specs named ``observation_<key>``.
      action_spec: the batched ``prev_action`` input.
      state_sizes: k of each ``[B, k]`` state tensor (``(1,)``: the dummy state).
      noise_specs: the noise inputs of ``action_from_noise``, in order.
    """

    # AutoGraph converts the steps' Python control flow when tracing them (False: traced as
    # written, as TAAC's are).
    autograph = True
    # The parity check (:func:`tfagents_vtrace.export.artefacts.check`) replays the LiteRT
    # and ONNX files from the reference's states when True: for policies whose own state
    # dynamics amplify float rounding.
    parity_teacher_forcing = False

    def __init__(
        self,
        name: str,
        metadata: dict,
        observation_spec,
        action_spec: tf.TensorSpec,
        state_sizes: tuple[int, ...],
        noise_specs: list[tf.TensorSpec],
    ):
        super().__init__(name=name)
        self.metadata = tf.Variable(json.dumps(metadata), trainable=False)
        # Plain containers (not tracked: they are no part of the SavedModel's object graph).
        self.observation_spec = self._no_dependency(observation_spec)
        self.noise_specs = self._no_dependency(list(noise_specs))
        states = tuple(
            tf.TensorSpec([None, k], tf.float32, name=f"state_{i}")
            for i, k in enumerate(state_sizes)
        )
        step_inputs = [
            tf.TensorSpec([None], tf.bool, name="first"),
            action_spec,
            tf.TensorSpec([None], tf.float32, name="prev_reward"),
        ]
        # observation (its leaves), first, prev_action, prev_reward, state_0, state_1, ...
        self.flat_specs = self._no_dependency(
            [*tf.nest.flatten(observation_spec), *step_inputs, *states]
        )
        self.state_specs = self._no_dependency(states)
        inputs = [observation_spec, *step_inputs, states]
        batch = [tf.TensorSpec([], tf.int32, name="batch_size")]
        self.get_initial_state = tf.function(self.initial_state, input_signature=batch)
        self.action = tf.function(self._action, input_signature=inputs, autograph=self.autograph)
        self.greedy_action = tf.function(
            self._greedy_action, input_signature=inputs, autograph=self.autograph
        )
        self.action_from_noise = tf.function(
            self.noise_step, input_signature=[*inputs, *self.noise_specs], autograph=self.autograph
        )

    # What a subclass supplies.

    def initial_state(self, batch_size) -> tuple:
        """The state tensors before the first step of ``batch_size`` episodes."""
        raise NotImplementedError

    def step(self, observation, first, prev_action, prev_reward, state, greedy: bool) -> dict:
        """``action`` (``greedy=False``) or ``greedy_action``: a dict with ``action``,
        ``value``, what the policy reports, and ``state`` (a tuple)."""
        raise NotImplementedError

    def noise_step(self, observation, first, prev_action, prev_reward, state, noise=None) -> dict:
        """``action_from_noise``: :meth:`step`'s dict of the draw that the noise selects, in
        plain TF ops; without noise, the greedy step. A subclass with several noise inputs
        takes one argument per ``noise_specs`` entry, named as the entry, None by default."""
        raise NotImplementedError

    def steps_of_one_call(self, flat_inputs, noises) -> tuple[dict, dict]:
        """``(sampled, greedy)`` flat outputs of one call (:meth:`flat_step`), the ONNX graph's
        (:mod:`tfagents_vtrace.export.onnx`). A subclass may share one forward pass between the
        two and return, in ``greedy``, only the outputs that differ from ``sampled``."""
        return self.flat_step(flat_inputs, noises), self.flat_step(flat_inputs)

    def portable(self) -> PolicyModule:
        """The module the LiteRT and ONNX files are traced from, and checked against: this
        one, or a variant without what other runtimes cannot reproduce (random draws in
        ``greedy_action``, random episode starts)."""
        return self

    # Built from the above.

    def _action(self, observation, first, prev_action, prev_reward, state):
        return self.step(observation, first, prev_action, prev_reward, state, greedy=False)

    def _greedy_action(self, observation, first, prev_action, prev_reward, state):
        return self.step(observation, first, prev_action, prev_reward, state, greedy=True)

    def _unflatten(self, flat) -> tuple:
        """``(observation, first, prev_action, prev_reward, state)`` of flat inputs."""
        n = len(tf.nest.flatten(self.observation_spec))
        observation = tf.nest.pack_sequence_as(self.observation_spec, list(flat[:n]))
        return (observation, *flat[n : n + 3], tuple(flat[n + 3 :]))

    def flat_step(self, flat_inputs, noises=()) -> dict:
        """:meth:`noise_step` on flat inputs (``flat_specs``), its ``state`` flattened to
        ``state_0, ...``: the portable files' step (greedy without ``noises``)."""
        return _flat_state(self.noise_step(*self._unflatten(flat_inputs), *noises))

    def serving_signatures(self) -> dict:
        """Concrete functions with flat named inputs and outputs (module docstring). They call
        the module's traced functions (call ops), so nothing is traced twice."""
        n = len(self.flat_specs)

        def make(step_fn, specs):
            def flat_fn(*flat):
                return _flat_state(step_fn(*self._unflatten(flat[:n]), *flat[n:]))

            return tf.function(flat_fn, input_signature=specs).get_concrete_function()

        def init_flat(batch_size):
            return {f"state_{i}": s for i, s in enumerate(self.get_initial_state(batch_size))}

        action = make(self.action, self.flat_specs)
        batch = [tf.TensorSpec([], tf.int32, "batch_size")]
        return {
            "serving_default": action,
            "action": action,
            "greedy_action": make(self.greedy_action, self.flat_specs),
            "action_from_noise": make(
                self.action_from_noise, [*self.flat_specs, *self.noise_specs]
            ),
            "get_initial_state": tf.function(init_flat, input_signature=batch)
            .get_concrete_function(),
        }  # fmt: skip


def _flat_state(out: dict) -> dict:
    """``out`` with its ``state`` tuple as ``state_0, state_1, ...``."""
    flat = {k: v for k, v in out.items() if k != "state"}
    flat.update({f"state_{i}": s for i, s in enumerate(out["state"])})
    return flat
