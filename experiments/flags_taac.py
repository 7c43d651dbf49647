"""Flags of TAAC, TaacL and TaacQ (`tfagents_vtrace.agents.taac`), declared by `define_train_flags`.

A flag named like a field of the agent's ``Config`` fills it when given (see
``experiments.common.dataclass_from_flags``). Flags shared with other agents (``discount``,
``learning_rate``, ``num_workers``, ``t_max``, ...) are declared once in ``experiments.common``
and not repeated here.
"""

from __future__ import annotations

from absl import flags  # noqa: F401


def define_flags() -> None:
    """Declares the taac-only flags."""
