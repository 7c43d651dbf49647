"""The hyperparameters several agents share, each declared and validated once.

Three frozen dataclasses, one inside the other, so that an agent's config has exactly the
shared fields its learner reads (a flag it does not read stays an error, not a no-op):

* :class:`AgentConfig` (every agent): discount, reward scale, learning rate, gradient
  clipping, XLA compilation and the non-finite stop.
* :class:`LearnerConfig` (IMPALA, A2C, A3C, ACER): the optimizer, reward clipping and the
  entropy cost.
* :class:`ActorCriticConfig` (IMPALA, A2C, A3C): the baseline cost and the entropy schedule.

An agent's config subclasses one of them, redeclares a field only to change its default,
and calls ``super().__post_init__()`` first from its own ``__post_init__``; every error
names the field, the expected range and the received value.

The optimizer defaults follow IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561)
and A3C (Mnih et al. 2016, https://arxiv.org/abs/1602.01783): RMSProp with decay 0.99 and no
momentum, or Adam (the default: its per-parameter scaling is robust to reward and value
scales untuned), an optional linear learning-rate decay to zero, and global-norm gradient
clipping.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from tfagents_vtrace.agents.loss_inputs import REWARD_CLIPPING
from tfagents_vtrace.agents.optimization import LR_DECAYS, OPTIMIZERS
from tfagents_vtrace.utils.validation import (  # noqa: F401 - re-exported for the agents' configs
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_positive,
)


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """The fields of every agent's config."""

    discount: float = 0.99
    """gamma in (0, 1]: per-step discount; episode ends cut it to 0."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this (> 0) before clipping; values then learn returns of
    order one (e.g. 0.1 on CartPole, whose returns reach ~100)."""
    normalize_rewards: bool = False
    """Divide the rewards the learner trains on by a running estimate of the discounted
    return's standard deviation, clipped to +-10 (SB3 VecNormalize's ``norm_reward``), before
    ``reward_scale`` and clipping: value targets of order one whatever the reward's units.
    The statistics are checkpointed with the run. IMPALA, A2C, A3C and ACER (not on Ray)."""
    learning_rate: float = 1e-3
    """Initial learning rate (> 0)."""
    max_grad_norm: float | None = 40.0
    """Global-norm gradient clipping threshold (>= 0); 0 or None disables clipping."""
    jit_compile: bool = False
    """Compile the train step with XLA (single-replica strategies only). Off by default: on
    small networks the XLA compile (seconds) costs more than it saves."""
    max_nonfinite_updates: int = 10
    """An update with a non-finite loss or gradient is skipped; training stops after this
    many in a row."""

    def __post_init__(self) -> None:
        check_number("discount", self.discount, 0.0, 1.0, True, False)
        check_positive("reward_scale", self.reward_scale)
        check_bool("normalize_rewards", self.normalize_rewards)
        check_positive("learning_rate", self.learning_rate)
        if self.max_grad_norm is not None:
            check_positive("max_grad_norm", self.max_grad_norm, allow_zero=True)
        check_bool("jit_compile", self.jit_compile)
        check_int("max_nonfinite_updates", self.max_nonfinite_updates, 1)


@dataclasses.dataclass(frozen=True)
class LearnerConfig(AgentConfig):
    """:class:`AgentConfig`, plus the optimizer (the fields of
    :func:`tfagents_vtrace.agents.optimization.optimizer_from_config`), reward clipping and
    the entropy cost."""

    RESUME_FIXED: ClassVar[tuple[str, ...]] = ("optimizer", "lr_decay", "normalize_rewards")
    """The optimizer's variables are in the checkpoint, in order: another optimizer's slots,
    or a constant rate's variable (a decaying rate has none), cannot resume them, so a
    resume that changes either is refused; so is one that turns the return statistics of
    ``normalize_rewards`` on or off."""

    lr_decay: str = "none"
    """"none" or "linear" (to 0 over the run's total updates, as IMPALA)."""
    optimizer: str = "adam"
    """"adam", or "rmsprop" (IMPALA's; A3C's with shared statistics)."""
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
    reward_clipping: str = "none"
    """"none", "abs_one" (clip to [-1, 1]) or "soft_asymmetric" (IMPALA DMLab), after
    ``reward_scale``."""
    entropy_cost: float = 0.01
    """Weight of the entropy bonus (>= 0); the first update's when ``entropy_cost_end`` is
    set."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("lr_decay", self.lr_decay, LR_DECAYS)
        check_choice("optimizer", self.optimizer, OPTIMIZERS)
        for name in ("rmsprop_decay", "rmsprop_momentum", "adam_beta1", "adam_beta2"):
            check_number(name, getattr(self, name), 0.0, 1.0, False, True)
        for name in ("rmsprop_epsilon", "adam_epsilon"):
            check_positive(name, getattr(self, name))
        check_choice("reward_clipping", self.reward_clipping, REWARD_CLIPPING)
        check_positive("entropy_cost", self.entropy_cost, allow_zero=True)


@dataclasses.dataclass(frozen=True)
class ActorCriticConfig(LearnerConfig):
    """:class:`LearnerConfig`, plus the value loss's weight and the entropy schedule of the
    actor-critic losses (IMPALA, A2C, A3C)."""

    baseline_cost: float = 0.5
    """Weight of the value loss ``0.5 * (target - V)^2`` (>= 0)."""
    entropy_cost_end: float | None = None
    """None (the entropy weight stays ``entropy_cost``), or a weight >= 0 that the entropy
    weight anneals to linearly over the run (the last update uses it)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive("baseline_cost", self.baseline_cost, allow_zero=True)
        if self.entropy_cost_end is not None:
            check_positive("entropy_cost_end", self.entropy_cost_end, allow_zero=True)

    @property
    def entropy_schedule(self) -> tuple[float, float]:
        """``(first, last)`` entropy weights of the run (equal when it is constant)."""
        end = self.entropy_cost if self.entropy_cost_end is None else self.entropy_cost_end
        return float(self.entropy_cost), float(end)
