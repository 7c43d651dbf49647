"""A3C hyperparameters: the A2C loss settings plus the asynchronous workers (Mnih et al.
2016, https://arxiv.org/abs/1602.01783).

Field names equal the ``experiments.train`` flag names (``--num_workers``, ``--t_max`` and
the A2C ones), so the launcher can fill the dataclass from same-named flags.
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.learner_config import check_int


@dataclasses.dataclass(frozen=True)
class A3CConfig(A2CConfig):
    """A2C's loss/optimizer fields, plus the worker threads and their rollout length.

    The entropy weight is annealed from ``entropy_start`` to ``entropy_end`` over the run's
    total environment steps (the global step counter), not over updates.
    """

    num_workers: int = 4
    """Worker threads, each with its own environment(s) and local network copy."""
    t_max: int = 20
    """Steps of one partial rollout per environment (A3C's t_max); the LSTM state carries
    over from one rollout to the next."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("num_workers", "t_max"):
            check_int(name, getattr(self, name), 1)
