"""ONNX export of a policy module (tf2onnx), run with ONNX Runtime alone.

An ONNX model is one graph, so the file holds one step that gives the greedy and the sampled
action of one call::

    import numpy as np
    import onnxruntime as ort

    session = ort.InferenceSession("policy.onnx", providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    out = dict(zip(names, session.run(None, {
        "observation": obs, "first": first, "prev_action": prev_action,
        "prev_reward": prev_reward, "state_0": state_0, ..., "noise": noise})))
    out["greedy_action"], out["action"], out["value"], out["logits"]
    state_0 = out["next_state_0"]

Inputs: the SavedModel's flat ones (observation, or one ``observation_<key>`` per leaf of a
Dict / Tuple observation, an action mask included, first, prev_action, prev_reward, state_0,
... with a dynamic batch size) plus its noise inputs, e.g. ``noise`` ``[B, A]`` float32 (the
laws are in the metadata: uniform [0, 1) for categorical policies, standard normal for
Gaussian ones; a caller that wants only the greedy action may pass zeros). Outputs: those of
the SavedModel's ``action_from_noise`` (the draw of the noise), ``next_state_0, ...`` (ONNX
names every value once, so an output cannot share the name of the ``state_0`` input), and the
greedy step's outputs prefixed ``greedy_``: for an actor-critic policy, whose two steps share
one forward pass, ``greedy_action`` and ``greedy_log_prob`` only; for TAAC every output
(``greedy_b``, ``greedy_next_state_0``, ...). A zero initial state is
``np.zeros([B, k], np.float32)`` for each ``state_i`` input ``[B, k]``. The model's
``metadata_props`` hold ``tfagents_vtrace``: the SavedModel's metadata JSON. The graph is
traced from the module's :meth:`~tfagents_vtrace.export.policy_module.PolicyModule.portable`
variant.
"""

from __future__ import annotations

import os

import tensorflow as tf

from tfagents_vtrace.export.actor_critic import as_policy_module
from tfagents_vtrace.export.policy_module import PolicyModule
from tfagents_vtrace.export.target import check_export_file, write_file_atomically

DEFAULT_OPSET = 17


def onnx_step(module: PolicyModule):
    """``(tf.function, input specs)`` of the ONNX graph: both steps of one call (module
    docstring)."""
    specs = [*module.flat_specs, *module.noise_specs]
    n = len(module.flat_specs)

    def renamed(out: dict, prefix: str) -> dict:
        return {prefix + ("next_" + k if k.startswith("state_") else k): v for k, v in out.items()}

    def step(*flat):
        sampled, greedy = module.steps_of_one_call(flat[:n], flat[n:])
        return {**renamed(sampled, ""), **renamed(greedy, "greedy_")}

    return tf.function(step, input_signature=specs), specs


def onnx_model(policy, opset: int = DEFAULT_OPSET) -> bytes:
    """The serialized ONNX ``ModelProto`` of ``policy`` (a PolicyModule or an
    ActorCriticNetwork), with the SavedModel's metadata JSON in
    ``metadata_props["tfagents_vtrace"]``.

    Raises:
      ValueError: ``policy`` is neither.
      ImportError: tf2onnx is not installed (the ``onnx`` extra).
    """
    module = as_policy_module(policy).portable()
    try:
        import tf2onnx
    except ImportError as e:
        raise ImportError("ONNX export needs tf2onnx: pip install 'tfagents_vtrace[onnx]'") from e
    function, specs = onnx_step(module)
    model, _ = tf2onnx.convert.from_function(function, input_signature=specs, opset=opset)
    entry = model.metadata_props.add()
    entry.key, entry.value = "tfagents_vtrace", module.metadata.numpy().decode()
    return model.SerializeToString()


def export_onnx(
    policy, path: str | os.PathLike, *, overwrite: bool = False, opset: int = DEFAULT_OPSET
) -> str:
    """Writes ``policy`` (a PolicyModule or an ActorCriticNetwork) as an ONNX file at ``path``
    (written beside, renamed into place).

    Args:
      policy: the policy.
      path: the ``.onnx`` file.
      overwrite: replace an existing ONNX model (written by tf2onnx) at ``path``.
      opset: the ONNX opset.
    Returns:
      ``path`` as a string.
    Raises:
      ValueError: as :func:`onnx_model`; as :func:`tfagents_vtrace.export.litert.export_tflite`,
        for ONNX models.
      ImportError: tf2onnx is not installed.
    """
    path = os.fspath(path)
    check_export_file(path, "onnx", overwrite)  # before anything is traced
    return write_file_atomically(path, onnx_model(policy, opset), "onnx", overwrite=overwrite)
