"""Exporting a trained policy, and playing it: one policy-module protocol, three formats.

* :mod:`~tfagents_vtrace.export.policy_module`: :class:`PolicyModule`, what every agent's
  exported policy is (its acting functions and serving signatures); the actor-critic agents
  share :mod:`~tfagents_vtrace.export.actor_critic`'s, TAAC has its own
  (``tfagents_vtrace.agents.taac.export``).
* :mod:`~tfagents_vtrace.export.saved_model`, :mod:`~tfagents_vtrace.export.litert`,
  :mod:`~tfagents_vtrace.export.onnx`: the writers of the formats that
  :mod:`~tfagents_vtrace.export.target` lists (with where an artefact may be written, and
  how it is put into place); :mod:`~tfagents_vtrace.export.artefacts` picks one and checks
  what it wrote with :mod:`~tfagents_vtrace.export.parity`.
* :mod:`~tfagents_vtrace.export.playing`: loads an exported SavedModel and plays episodes.

This package imports :mod:`tfagents_vtrace.networks`, :mod:`tfagents_vtrace.envs` and
:mod:`tfagents_vtrace.utils` only; the runtime, the agents and the commands import it.
``export_policy``, ``export_tflite`` and ``export_onnx`` are importable from here too,
loaded on first use so that ``tfagents_vtrace.export.target`` stays free of TensorFlow.
"""

_WRITERS = {"export_policy": "saved_model", "export_tflite": "litert", "export_onnx": "onnx"}


def __getattr__(name: str):
    if name in _WRITERS:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_WRITERS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
