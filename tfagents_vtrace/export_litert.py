"""LiteRT (TFLite) export of an actor-critic policy: one float32 file of builtin ops only.

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
(inputs observation, first, prev_action, prev_reward, state_0, ... and, for ``action``,
``noise``; outputs action, value, log_prob, the distribution parameters, q with a discrete Q
head, state_0, ...) and ``get_initial_state`` (batch_size -> state_0, ...). ``action`` is the
SavedModel's ``action_from_noise``: the noise law is in :mod:`tfagents_vtrace.export_portable`
(uniform [0, 1) for categorical policies, standard normal for Gaussian ones). A feed-forward
policy carries the dummy ``state_0`` ``[B, 1]`` passed through, as the SavedModel does.

The graph is traced from the portable step, its variables frozen into constants, saved as a
variable-free SavedModel with those three signatures and converted with
``TFLITE_BUILTINS`` only (no Flex / ``SELECT_TF_OPS``: the converter fails instead), without
quantisation (float32 weights and activations).
"""

from __future__ import annotations

import os
import tempfile

import tensorflow as tf

from tfagents_vtrace.export_portable import (
    check_single_observation,
    exported_network,
    portable_functions,
)
from tfagents_vtrace.export_target import check_export_file, write_file_atomically
from tfagents_vtrace.networks import ActorCriticNetwork

SIGNATURES = ("greedy_action", "action", "get_initial_state")


def _initial_state_function(network: ActorCriticNetwork):
    sizes = tuple(network.state_sizes) or (1,)

    def init(batch_size):
        return {f"state_{i}": tf.zeros([batch_size, k], tf.float32) for i, k in enumerate(sizes)}

    spec = [tf.TensorSpec([], tf.int32, name="batch_size")]
    return tf.function(init, input_signature=spec).get_concrete_function()


def tflite_model(network: ActorCriticNetwork) -> bytes:
    """The serialized LiteRT flatbuffer of ``network``'s policy (see the module docstring).

    Raises:
      ValueError: ``network`` is not an ActorCriticNetwork, or its observation is a Dict /
        Tuple space (SavedModel only).
      tf.lite's ConverterError: an op of the network has no LiteRT builtin.
    """
    if not isinstance(network, ActorCriticNetwork):
        raise ValueError(f"network must be an ActorCriticNetwork, got {type(network).__name__}")
    check_single_observation(network, "LiteRT")
    network = exported_network(network)
    functions = portable_functions(network)
    functions["get_initial_state"] = _initial_state_function(network)
    return convert_functions(functions)


def convert_functions(functions: dict) -> bytes:
    """The LiteRT flatbuffer of the concrete functions ``functions`` (one signature per
    :data:`SIGNATURES` key; frozen: no variables), builtin ops only, float32.

    Shared by every policy kind (:func:`tflite_model`, TAAC's
    ``tfagents_vtrace.agents.taac.portable``).

    Raises:
      tf.lite's ConverterError: an op has no LiteRT builtin.
    """
    with tempfile.TemporaryDirectory(prefix="tflite-src-") as source:
        tf.saved_model.save(tf.Module(), source, signatures=functions)
        converter = tf.lite.TFLiteConverter.from_saved_model(source, signature_keys=SIGNATURES)
        converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
        converter.optimizations = []  # float32: no quantisation
        return converter.convert()


def export_tflite(
    network: ActorCriticNetwork, path: str | os.PathLike, *, overwrite: bool = False
) -> str:
    """Writes ``network``'s policy as a LiteRT file at ``path`` (written beside, renamed).

    Args:
      network: a built :class:`ActorCriticNetwork`.
      path: the ``.tflite`` file.
      overwrite: replace an existing LiteRT model at ``path``.
    Returns:
      ``path`` as a string.
    Raises:
      ValueError: ``network`` is not an ActorCriticNetwork; ``path`` is a directory, a
        symbolic link or a non-empty file that is not a LiteRT model (even with
        ``overwrite``), or a LiteRT model and ``overwrite`` is False.
    """
    path = os.fspath(path)
    check_export_file(path, "tflite", overwrite)  # before anything is traced
    return write_file_atomically(path, tflite_model(network), "tflite", overwrite=overwrite)
