"""LiteRT and ONNX export of a TAAC/TaacL/TaacQ policy, run without TensorFlow.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521. The files hold the step of the SavedModel's
``action_from_noise`` (:func:`~tfagents_vtrace.agents.taac.policy.act_from_noise`): the
actor's Gaussian sample and the act-or-repeat choice ``b`` take their noise as inputs, so the
same noise gives the same actions in every format (:mod:`tfagents_vtrace.export_parity`).

Inputs (batch size B dynamic): ``observation`` [B, *obs_shape] float32, ``first`` [B] bool,
``prev_action`` [B, A] float32 and ``prev_reward`` [B] float32 (accepted and ignored, as by
the SavedModel), the state ``state_0`` [B, k*A] (the trajectory tau: k = 1, 2, 3 vectors for
TAAC, TaacL, TaacQ) and ``state_1`` [B, 1] (the repeat count), and for a sampled step
``noise`` [B, A] standard normal and ``b_noise`` [B] uniform in [0, 1). Outputs, as the
SavedModel's: ``action`` [B, A] in the environment's bounds, ``unit_action`` (in [-1, 1]),
``b`` [B] int32 (1: a new trajectory started), ``repeats`` [B] int32, ``p_b1`` [B],
``value`` [B] and the new ``state_0``, ``state_1``.

* LiteRT (``.tflite``, builtin ops only, float32): signatures ``greedy_action`` (no noise),
  ``action`` (with ``noise`` and ``b_noise``) and ``get_initial_state`` (``batch_size`` ->
  zeros ``state_0``, ``state_1``), as :mod:`tfagents_vtrace.export_litert`.
* ONNX (one graph, tf2onnx): one run gives both steps: the sampled outputs under their names
  (the states as ``next_state_0``, ``next_state_1``: ONNX names every value once) and the
  greedy ones prefixed ``greedy_`` (``greedy_action``, ..., ``greedy_next_state_0``); a zero
  initial state is ``np.zeros`` of each ``state_i`` input's shape. ``metadata_props`` holds
  ``tfagents_vtrace``: the SavedModel's metadata JSON.

``greedy_action`` is the mode of both stages (``tanh(loc)``, ``argmax b``): the SavedModel's
``greedy_action`` with ``epsilon_greedy = 0`` (the run's epsilon-greedy evaluation draws
random numbers that no other runtime can reproduce; a caller that wants them mixes in the
sampled step). Episodes start from the zero trajectory: a run with
``randomize_first_state_tau`` (random starts, an exploration aid) is exported without it.
The metadata says so (``epsilon_greedy: 0.0``, ``randomize_first_state_tau: false``).
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfagents_vtrace.agents.taac.export import TaacPolicyModule
from tfagents_vtrace.export_onnx import DEFAULT_OPSET
from tfagents_vtrace.export_portable import freeze
from tfagents_vtrace.export_target import check_export_file, write_file_atomically

__all__ = [
    "export_taac_onnx",
    "export_taac_tflite",
    "onnx_model",
    "portable_functions",
    "portable_module",
    "portable_step",
    "tflite_model",
]


def portable_module(learner, action_space) -> TaacPolicyModule:
    """The :class:`TaacPolicyModule` the files are traced from (and checked against):
    ``epsilon_greedy=0``, no random episode starts."""
    return TaacPolicyModule(
        learner, action_space, epsilon_greedy=0.0, randomize_first_state_tau=False
    )


def portable_step(module: TaacPolicyModule, flat_inputs, noise=None, b_noise=None) -> dict:
    """One flat step: ``flat_inputs`` = observation, first, prev_action, prev_reward,
    state_0, state_1; returns the flat outputs (module docstring); greedy without noise."""
    observation, first, _, _, *state = flat_inputs
    out = module.noise_step(observation, first, tuple(state), noise, b_noise)
    out.update({f"state_{i}": s for i, s in enumerate(out.pop("state"))})
    return out


def _initial_state_function(module: TaacPolicyModule):
    def init(batch_size):
        return {f"state_{i}": s for i, s in enumerate(module.get_initial_state(batch_size))}

    spec = [tf.TensorSpec([], tf.int32, name="batch_size")]
    return tf.function(init, input_signature=spec).get_concrete_function()


def portable_functions(module: TaacPolicyModule) -> dict:
    """Frozen ``{"greedy_action", "action", "get_initial_state"}`` concrete functions (weights
    folded into constants), the LiteRT file's signatures."""
    specs = module.flat_specs

    def greedy(*flat):
        return portable_step(module, flat)

    def sample(*flat):
        return portable_step(module, flat[:-2], *flat[-2:])

    functions = {
        "greedy_action": tf.function(greedy, input_signature=specs),
        "action": tf.function(sample, input_signature=[*specs, *module.noise_specs]),
    }
    frozen = {k: freeze(f.get_concrete_function()) for k, f in functions.items()}
    frozen["get_initial_state"] = _initial_state_function(module)
    return frozen


def tflite_model(learner, action_space) -> bytes:
    """The serialized LiteRT flatbuffer of the TAAC policy (module docstring).

    Raises:
      tf.lite's ConverterError: an op has no LiteRT builtin.
    """
    from tfagents_vtrace.export_litert import convert_functions

    return convert_functions(portable_functions(portable_module(learner, action_space)))


def onnx_step(module: TaacPolicyModule):
    """``(tf.function, input specs)`` of the ONNX graph: both steps from one call."""
    specs = [*module.flat_specs, *module.noise_specs]

    def renamed(out: dict, prefix: str) -> dict:
        return {prefix + ("next_" + k if k.startswith("state_") else k): v for k, v in out.items()}

    def step(*flat):
        inputs, noises = flat[:-2], flat[-2:]
        result = renamed(portable_step(module, inputs, *noises), "")
        result.update(renamed(portable_step(module, inputs), "greedy_"))
        return result

    return tf.function(step, input_signature=specs), specs


def onnx_model(learner, action_space, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX ``ModelProto`` of the TAAC policy (module docstring).

    Raises:
      ImportError: tf2onnx is not installed (the ``onnx`` extra).
    """
    import json

    from tfagents_vtrace.export_onnx import convert_function

    module = portable_module(learner, action_space)
    function, specs = onnx_step(module)
    metadata = json.loads(module.metadata.numpy())
    return convert_function(function, specs, metadata, opset)


def export_taac_tflite(
    learner, path: str | os.PathLike, action_space, *, overwrite: bool = False
) -> str:
    """Writes the TAAC policy as a LiteRT file at ``path`` (written beside, renamed); returns
    ``path``.

    Raises:
      ValueError: ``path`` is a directory, a symbolic link or a non-empty file that is not a
        LiteRT model (even with ``overwrite``), or a LiteRT model and ``overwrite`` is False.
    """
    path = os.fspath(path)
    check_export_file(path, "tflite", overwrite)  # before anything is traced
    data = tflite_model(learner, action_space)
    return write_file_atomically(path, data, "tflite", overwrite=overwrite)


def export_taac_onnx(
    learner,
    path: str | os.PathLike,
    action_space,
    *,
    overwrite: bool = False,
    opset: int = DEFAULT_OPSET,
) -> str:
    """Writes the TAAC policy as an ONNX file at ``path`` (written beside, renamed); returns
    ``path``.

    Raises:
      ValueError: as :func:`export_taac_tflite`, for ONNX models.
      ImportError: tf2onnx is not installed.
    """
    path = os.fspath(path)
    check_export_file(path, "onnx", overwrite)  # before anything is traced
    data = onnx_model(learner, action_space, opset)
    return write_file_atomically(path, data, "onnx", overwrite=overwrite)
