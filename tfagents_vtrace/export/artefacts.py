"""One path from a policy to an artefact of any format, and one parity check of it.

``tfv-export`` runs these for every agent: the agent's spec rebuilds the run's policy module
(:class:`~tfagents_vtrace.export.policy_module.PolicyModule`), :func:`write` writes it in a
format of :data:`~tfagents_vtrace.export.target.FORMATS` and :func:`check` compares what was
written with the policy (:mod:`tfagents_vtrace.export.parity`).
"""

from __future__ import annotations

import os
import tempfile

from tfagents_vtrace.export.actor_critic import as_policy_module
from tfagents_vtrace.export.litert import export_tflite
from tfagents_vtrace.export.onnx import export_onnx
from tfagents_vtrace.export.parity import (
    ParityReport,
    SavedModelRunner,
    check_parity,
    open_runner,
)
from tfagents_vtrace.export.saved_model import export_policy
from tfagents_vtrace.export.target import check_format

WRITERS = {"saved_model": export_policy, "tflite": export_tflite, "onnx": export_onnx}


def write(policy, path: str | os.PathLike, fmt: str = "saved_model", *, overwrite=False) -> str:
    """Writes ``policy`` (a PolicyModule or an ActorCriticNetwork) as a ``fmt`` artefact at
    ``path`` (written beside, renamed into place); returns ``path``.

    Raises:
      ValueError: ``fmt`` is not a format; from the format's writer (``path`` may not be
        written).
    """
    check_format(fmt)
    return WRITERS[fmt](policy, path, overwrite=overwrite)


def check(policy, path: str | os.PathLike, fmt: str, env, *, steps: int = 300) -> ParityReport:
    """The trajectory parity report of the ``fmt`` artefact at ``path``, written from
    ``policy``, over ``steps`` steps of ``env`` (one gymnasium environment, batch size 1).

    A SavedModel is checked against ``policy`` in process. A LiteRT or ONNX file is checked
    against a SavedModel of the policy's portable variant (``PolicyModule.portable``: the
    module the file was traced from), replayed from that reference's states when the policy
    asks for it (``PolicyModule.parity_teacher_forcing``).
    """
    check_format(fmt)
    module = as_policy_module(policy)
    if fmt == "saved_model":
        return check_parity(path, SavedModelRunner(module), env, steps=steps)
    portable = module.portable()
    with tempfile.TemporaryDirectory(prefix="export-check-") as tmp:
        reference = export_policy(portable, os.path.join(tmp, "reference"))
        return check_parity(
            reference,
            open_runner(path, fmt=fmt),
            env,
            steps=steps,
            teacher_forcing=portable.parity_teacher_forcing,
        )
