"""ONNX export of an actor-critic policy (tf2onnx), run with ONNX Runtime alone.

An ONNX model is one graph, so the file holds one step that gives the greedy and the sampled
action from one forward pass::

    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(None, {
        "observation": obs, "first": first, "prev_action": prev_action,
        "prev_reward": prev_reward, "state_0": state_0, ..., "noise": noise})))
    out["greedy_action"], out["action"], out["value"], out["logits"]
    state_0 = out["next_state_0"]

Inputs: the SavedModel's flat ones (observation, first, prev_action, prev_reward, state_0,
... with a dynamic batch size) plus ``noise`` ``[B, A]`` float32 (the law of
:mod:`tfagents_vtrace.export_portable`: uniform [0, 1) for categorical policies, standard
normal for Gaussian ones; a caller that wants only the greedy action may pass zeros).
Outputs: ``action`` and ``log_prob`` (the draw of ``noise``: the SavedModel's
``action_from_noise``), ``greedy_action`` and ``greedy_log_prob`` (its ``greedy_action``),
``value``, the distribution parameters, ``q`` with a discrete Q head, and
``next_state_0, ...``: ONNX names every value once, so an output cannot share the name of the
``state_0`` input. A zero initial state is ``np.zeros([B, k], np.float32)`` for each
``state_i`` input ``[B, k]``. The model's ``metadata_props`` hold ``tfagents_vtrace``: the
SavedModel's metadata JSON.
"""

from __future__ import annotations

import json
import os

import tensorflow as tf

from tfagents_vtrace import export_portable
from tfagents_vtrace.export_target import check_export_file, write_file_atomically
from tfagents_vtrace.networks import ActorCriticNetwork

DEFAULT_OPSET = 17


def onnx_step(network: ActorCriticNetwork):
    """The traced ``tf.function`` converted to ONNX (see the module docstring)."""
    specs = [*export_portable.flat_input_specs(network), export_portable.noise_spec(network)]

    def step(*flat):
        out, new_state = export_portable.forward(network, flat[:-1])
        greedy = export_portable.outputs(network, out)
        result = export_portable.outputs(network, out, noise=flat[-1])
        result["greedy_action"] = greedy["action"]
        result["greedy_log_prob"] = greedy["log_prob"]
        result.update({f"next_state_{i}": s for i, s in enumerate(new_state)})
        return result

    return tf.function(step, input_signature=specs), specs


def onnx_model(network: ActorCriticNetwork, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX ``ModelProto`` of ``network``'s policy.

    Raises:
      ValueError: ``network`` is not an ActorCriticNetwork, or its observation is a Dict /
        Tuple space (SavedModel only).
      ImportError: tf2onnx is not installed (the ``onnx`` extra).
    """
    from tfagents_vtrace.export import policy_metadata  # the SavedModel's metadata

    if not isinstance(network, ActorCriticNetwork):
        raise ValueError(f"network must be an ActorCriticNetwork, got {type(network).__name__}")
    export_portable.check_single_observation(network, "ONNX")
    network = export_portable.exported_network(network)
    function, specs = onnx_step(network)
    return convert_function(function, specs, policy_metadata(network), opset)


def convert_function(function, specs, metadata: dict, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX ``ModelProto`` of the ``tf.function`` ``function`` (inputs
    ``specs``, dict outputs) with ``metadata`` as JSON in ``metadata_props["tfagents_vtrace"]``.

    Shared by every policy kind (:func:`onnx_model`, TAAC's
    ``tfagents_vtrace.agents.taac.portable``).

    Raises:
      ImportError: tf2onnx is not installed (the ``onnx`` extra).
    """
    try:
        import tf2onnx
    except ImportError as e:
        raise ImportError("ONNX export needs tf2onnx: pip install 'tfagents_vtrace[onnx]'") from e
    model, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=opset)
    entry = model.metadata_props.add()
    entry.key, entry.value = "tfagents_vtrace", json.dumps(metadata)
    return model.SerializeToString()


def export_onnx(
    network: ActorCriticNetwork,
    path: str | os.PathLike,
    *,
    overwrite: bool = False,
    opset: int = DEFAULT_OPSET,
) -> str:
    """Writes ``network``'s policy as an ONNX file at ``path`` (written beside, renamed).

    Args:
      network: a built :class:`ActorCriticNetwork`.
      path: the ``.onnx`` file.
      overwrite: replace an existing ONNX model (written by tf2onnx) at ``path``.
      opset: the ONNX opset.
    Returns:
      ``path`` as a string.
    Raises:
      ValueError: as :func:`tfagents_vtrace.export_litert.export_tflite`, for ONNX models.
      ImportError: tf2onnx is not installed.
    """
    path = os.fspath(path)
    check_export_file(path, "onnx", overwrite)  # before anything is traced
    return write_file_atomically(path, onnx_model(network, opset), "onnx", overwrite=overwrite)
