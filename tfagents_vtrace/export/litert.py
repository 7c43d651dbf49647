"""LiteRT (TFLite) export of a policy module: one float32 file of builtin ops only.

The model runs with the ``ai-edge-litert`` interpreter alone (no TensorFlow, no this
package)::

    import numpy as np
    from ai_edge_litert.interpreter import Interpreter

    model = Interpreter(model_path="policy.tflite")
    greedy = model.get_signature_runner("greedy_action")
    sample = model.get_signature_runner("action")
    state = model.get_signature_runner("get_initial_state")(batch_size=np.int32(B))
    out = greedy(observation=obs, first=first, prev_action=prev_action,
                 prev_reward=prev_reward, **state)           # state_0, state_1, ...
    out = sample(..., **state, noise=noise)                  # noise [B, A] float32
    out["action"], out["value"], out["log_prob"], out["logits"]  # (loc, scale; q)
    state = {k: v for k, v in out.items() if k.startswith("state_")}

Signatures (the SavedModel's flat ones, batch size dynamic): ``greedy_action`` and ``action``
(inputs observation, or one ``observation_<key>`` per leaf of a Dict / Tuple observation, an
action mask included, first, prev_action, prev_reward, state_0, ... and, for ``action``, the
noise inputs; outputs those of the SavedModel's, state_0, ...) and ``get_initial_state``
(batch_size -> zeros state_0, ...). ``action`` is the SavedModel's ``action_from_noise``
(the noise laws are in the metadata: uniform [0, 1) for categorical policies, standard normal
for Gaussian ones; TAAC adds ``b_noise``). A feed-forward policy carries the dummy ``state_0``
``[B, 1]`` passed through, as the SavedModel does. The file is traced from the module's
:meth:`~tfagents_vtrace.export.policy_module.PolicyModule.portable` variant.

The graph is traced from the portable step, its variables frozen into constants, saved as a
variable-free SavedModel with those three signatures and converted with
``TFLITE_BUILTINS`` only (no Flex / ``SELECT_TF_OPS``: the converter fails instead), without
quantisation (float32 weights and activations).
"""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from tfagents_vtrace.export.actor_critic import as_policy_module
from tfagents_vtrace.export.policy_module import PolicyModule
from tfagents_vtrace.export.target import check_export_file, write_file_atomically

SIGNATURES = ("greedy_action", "action", "get_initial_state")


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


def portable_functions(module: PolicyModule) -> dict:
    """The file's signatures: ``greedy_action`` and ``action``, frozen concrete functions of
    ``module.flat_step`` (weights folded into constants), and ``get_initial_state``."""
    specs, n = module.flat_specs, len(module.flat_specs)

    def greedy(*flat):
        return module.flat_step(flat)

    def sample(*flat):
        return module.flat_step(flat[:n], flat[n:])

    def init(batch_size):
        return {s.name: tf.zeros([batch_size, s.shape[-1]], tf.float32) for s in module.state_specs}

    traced = {
        "greedy_action": tf.function(greedy, input_signature=specs).get_concrete_function(),
        "action": tf.function(
            sample, input_signature=[*specs, *module.noise_specs]
        ).get_concrete_function(),
    }
    functions = {k: freeze(f) for k, f in traced.items()}
    batch = [tf.TensorSpec([], tf.int32, name="batch_size")]
    init = tf.function(init, input_signature=batch)
    functions["get_initial_state"] = init.get_concrete_function()
    return functions


def tflite_model(policy) -> bytes:
    """The serialized LiteRT flatbuffer of ``policy`` (see the module docstring): its
    portable variant's signatures, converted with builtin ops only, float32.

    Raises:
      ValueError: ``policy`` is neither a PolicyModule nor an ActorCriticNetwork.
      tf.lite's ConverterError: an op of the policy has no LiteRT builtin.
    """
    module = as_policy_module(policy).portable()
    with tempfile.TemporaryDirectory(prefix="tflite-src-") as source:
        tf.saved_model.save(tf.Module(), source, signatures=portable_functions(module))
        converter = tf.lite.TFLiteConverter.from_saved_model(source, signature_keys=SIGNATURES)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.optimizations = []  # float32: no quantisation
        return converter.convert()


def export_tflite(policy, path: str | os.PathLike, *, overwrite: bool = False) -> str:
    """Writes ``policy`` (a PolicyModule or an ActorCriticNetwork) as a LiteRT file at
    ``path`` (written beside, renamed into place).

    Returns:
      ``path`` as a string.
    Raises:
      ValueError: as :func:`tflite_model`; ``path`` is a directory, a symbolic link or a
        non-empty file that is not a LiteRT model (even with ``overwrite``), or a LiteRT
        model and ``overwrite`` is False.
    """
    path = os.fspath(path)
    check_export_file(path, "tflite", overwrite)  # before anything is traced
    return write_file_atomically(path, tflite_model(policy), "tflite", overwrite=overwrite)
