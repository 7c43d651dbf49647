"""IMPALA learner hyperparameters (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561).

Defaults are the paper's where it gives them (RMSProp 0.99 / 0 / 0.1, baseline cost 0.5,
global-norm clipping 40, V-trace thresholds 1, linear learning-rate decay); the entropy cost
and learning rate are task dependent (experiments/configs/ holds tuned values). The
optimizer, clipping, XLA and non-finite fields come from
:class:`~tfagents_vtrace.agents.common_config.LearnerConfig`.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents.common import LR_DECAYS, OPTIMIZERS, REWARD_CLIPPING
from tfagents_vtrace.agents.common_config import (
    LearnerConfig,
    check_bool,
    check_choice,
    check_int,
)


def _positive(name: str, value, allow_zero: bool = False) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value >= 0 if allow_zero else value > 0)
    if not ok:
        want = "a finite number >= 0" if allow_zero else "a finite number > 0"
        raise ValueError(f"{name}: expected {want}, received {value!r}")


@dataclasses.dataclass(frozen=True)
class ImpalaConfig(LearnerConfig):
    """Hyperparameters of the IMPALA learner (losses, optimizer, compilation)."""

    learning_rate: float = 6e-4
    """Initial learning rate (> 0)."""
    lr_decay: str = "linear"
    """"linear" (to 0 over the run's total updates, as IMPALA) or "none"."""
    rmsprop_epsilon: float = 0.1
    """RMSProp epsilon (> 0); IMPALA uses 0.1."""
    discount: float = 0.99
    """gamma in (0, 1]: per-step discount; episode ends cut it to 0."""
    baseline_cost: float = 0.5
    """Weight of the value loss ``0.5 * (vs - V)^2`` (>= 0)."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus (>= 0)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this (> 0) before clipping; values then learn returns of
    order one (e.g. 0.1 on CartPole, whose returns reach ~100)."""
    reward_clipping: str = "none"
    """"none", "abs_one" (clip to [-1, 1]) or "soft_asymmetric" (IMPALA DMLab)."""
    clip_rho_threshold: float | None = 1.0
    """rho-bar of V-trace (> 0), or None for no clipping."""
    clip_pg_rho_threshold: float | None = 1.0
    """Clipping of the policy-gradient importance weight (> 0), or None."""
    clip_c_threshold: float | None = 1.0
    """c-bar, the trace-cutting threshold (> 0), or None."""
    vtrace_lambda: float = 1.0
    """lambda in [0, 1] multiplying the trace coefficients c."""

    def __post_init__(self) -> None:
        # IMPALA's own wording for the numeric learner fields ("a finite number > 0").
        if not (isinstance(self.discount, int | float) and 0.0 < self.discount <= 1.0):
            raise ValueError(f"discount: expected a number in (0, 1], received {self.discount!r}")
        _positive("learning_rate", self.learning_rate)
        _positive("reward_scale", self.reward_scale)
        check_choice("lr_decay", self.lr_decay, LR_DECAYS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        check_choice("reward_clipping", self.reward_clipping, REWARD_CLIPPING)
        for name in ("rmsprop_decay", "adam_beta1", "adam_beta2", "rmsprop_momentum"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0.0 <= value < 1.0):
                raise ValueError(f"{name}: expected a number in [0, 1), received {value!r}")
        _positive("rmsprop_epsilon", self.rmsprop_epsilon)
        _positive("adam_epsilon", self.adam_epsilon)
        for name in ("max_grad_norm", "baseline_cost", "entropy_cost"):
            _positive(name, getattr(self, name), allow_zero=True)
        for name in ("clip_rho_threshold", "clip_pg_rho_threshold", "clip_c_threshold"):
            if getattr(self, name) is not None:
                _positive(name, getattr(self, name))
        if not (isinstance(self.vtrace_lambda, int | float) and 0.0 <= self.vtrace_lambda <= 1.0):
            raise ValueError(
                f"vtrace_lambda: expected a number in [0, 1], received {self.vtrace_lambda!r}"
            )
        check_bool("jit_compile", self.jit_compile)
        check_int("max_nonfinite_updates", self.max_nonfinite_updates, 1)
