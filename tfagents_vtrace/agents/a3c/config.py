"""A3C hyperparameters: the A2C loss settings plus the asynchronous workers (Mnih et al.
2016, https://arxiv.org/abs/1602.01783).

Field names equal the ``tfv-train`` flag names (``--num_workers``, ``--t_max`` and
the A2C ones), so the launcher can fill the dataclass from same-named flags. The defaults
learn small tasks with no tuning: A2C's, with one optimizer shared by the workers and
5-step rollouts; the A3C meta-RL fork's settings (per-worker Adam statistics, n-step targets,
summed losses) are the preset ``configs/a3c_reference.cfg``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.learner_config import check_bool, check_int


@dataclasses.dataclass(frozen=True)
class A3CConfig(A2CConfig):
    """A2C's loss/optimizer fields, plus the worker threads and their rollout length.

    The entropy weight is annealed from ``entropy_cost`` to ``entropy_cost_end`` over the
    run's total environment steps (the global step counter), not over updates.
    """

    RESUME_FIXED: ClassVar[tuple[str, ...]] = (
        "num_workers",
        "shared_optimizer",
        *A2CConfig.RESUME_FIXED,
    )

    num_workers: int = 4
    """Workers, each with its own environment(s) and local network copy: threads, or Ray
    actor processes with ``backend="ray"``."""
    t_max: int = 5
    """Steps of one partial rollout per environment (A3C's t_max; 5 is the A3C meta-RL
    fork's TIME_MAX); the LSTM state carries over from one rollout to the next."""

    shared_optimizer: bool = True
    """True: one optimizer whose statistics all workers share (Mnih et al. 2016's "shared
    RMSProp"). False (the A3C meta-RL fork's: "each worker has a different set of adam
    optimizer parameters"): every worker applies its gradients to the shared weights with
    its own optimizer statistics (Adam moments / RMSProp mean squares; with ``lr_decay`` each
    decays over its share, ``total_updates / num_workers``, of the updates)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("shared_optimizer", self.shared_optimizer)
        for name in ("num_workers", "t_max"):
            check_int(name, getattr(self, name), 1)
