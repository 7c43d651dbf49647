"""Config fields shared by the IMPALA, A2C/A3C and ACER learners, and their validators.

The optimizer defaults follow IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561)
and A3C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783): uncentred RMSProp with decay
0.99 and no momentum, or Adam, an optional linear learning-rate decay to zero, and global-norm
gradient clipping. An agent's config subclasses :class:`LearnerConfig` (redeclaring a field
to change its default) and calls :meth:`LearnerConfig.check_learner_fields` from its
``__post_init__``; every error names the field, the expected range and the received value.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents.optimization import LR_DECAYS, OPTIMIZERS
from tfagents_vtrace.validation import (  # noqa: F401 - re-exported for the agents' configs
    check_bool,
    check_choice,
    check_int,
    check_number,
)


@dataclasses.dataclass(frozen=True)
class LearnerConfig:
    """What every learner's update reads: optimizer, learning-rate schedule, gradient
    clipping, XLA compilation and the non-finite stop (the fields of
    :func:`tfagents_vtrace.agents.optimization.optimizer_from_config`)."""

    learning_rate: float = 7e-4
    """Initial learning rate (> 0)."""
    lr_decay: str = "none"
    """"none" or "linear" (to 0 over the run's total updates, as IMPALA)."""
    optimizer: str = "rmsprop"
    """"rmsprop" (IMPALA; A3C's with shared statistics) or "adam"."""
    rmsprop_decay: float = 0.99
    """RMSProp moving-average decay rho in [0, 1)."""
    rmsprop_momentum: float = 0.0
    """RMSProp momentum in [0, 1)."""
    rmsprop_epsilon: float = 1e-5
    """RMSProp epsilon (> 0)."""
    adam_beta1: float = 0.9
    """Adam beta_1 in [0, 1)."""
    adam_beta2: float = 0.999
    """Adam beta_2 in [0, 1)."""
    adam_epsilon: float = 1e-7
    """Adam epsilon (> 0)."""
    max_grad_norm: float = 40.0
    """Global-norm gradient clipping threshold (>= 0); 0 disables clipping."""
    jit_compile: bool = False
    """Compile the train step with XLA (single-replica strategies only). Off by default: on
    small networks the XLA compile (seconds) costs more than it saves."""
    max_nonfinite_updates: int = 10
    """Training stops after this many consecutive updates with a non-finite loss/gradient."""

    def check_learner_fields(self) -> None:
        """Raises ValueError naming the first of this class's fields that is out of range."""
        check_number("learning_rate", self.learning_rate, 0.0, math.inf, True, True)
        check_choice("lr_decay", self.lr_decay, LR_DECAYS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        for name in ("rmsprop_decay", "rmsprop_momentum", "adam_beta1", "adam_beta2"):
            check_number(name, getattr(self, name), 0.0, 1.0, False, True)
        for name in ("rmsprop_epsilon", "adam_epsilon"):
            check_number(name, getattr(self, name), 0.0, math.inf, True, True)
        check_number("max_grad_norm", self.max_grad_norm, 0.0, math.inf, False, True)
        check_bool("jit_compile", self.jit_compile)
        check_int("max_nonfinite_updates", self.max_nonfinite_updates, 1)
