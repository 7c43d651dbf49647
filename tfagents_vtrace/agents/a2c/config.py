"""A2C hyperparameters (Mnih et al. 2016, https://arxiv.org/abs/1602.01783; GAE: Schulman et
al. 2015, https://arxiv.org/abs/1506.02438; meta-RL settings: Wang et al. 2016,
https://arxiv.org/abs/1611.05763).

Field names equal the ``experiments.train`` flag names they come from, so the launcher can
fill the dataclass from same-named flags. The defaults learn small tasks with no tuning
(Adam at 1e-3, GAE lambda 0.95 with TD(lambda) value targets, per-step mean losses, as
OpenAI Baselines' A2C); the A3C meta-RL fork's loss (n-step targets, summed losses) is the
preset ``configs/a2c_reference.cfg``. The optimizer, clipping, XLA and non-finite fields
come from :class:`~tfagents_vtrace.agents.learner_config.LearnerConfig`.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents.learner_config import LearnerConfig, check_choice, check_number
from tfagents_vtrace.agents.loss_inputs import REWARD_CLIPPING

VALUE_TARGETS = ("nstep", "lambda")
LOSS_REDUCTIONS = ("sum", "mean")


@dataclasses.dataclass(frozen=True)
class A2CConfig(LearnerConfig):
    """Hyperparameters of the advantage actor-critic loss and its optimizer."""

    learning_rate: float = 1e-3
    """Initial learning rate (> 0)."""
    optimizer: str = "adam"
    """"adam" or "rmsprop"."""
    max_grad_norm: float = 0.5
    """Global-norm gradient clipping threshold (>= 0); 0 disables clipping."""
    discount: float = 0.99
    """gamma in (0, 1]: per-step discount; episode ends cut it to 0."""
    gae_lambda: float = 0.95
    """lambda in [0, 1] of GAE; 1.0 gives the n-step returns of A3C (bootstrapped at the end
    of the unroll), 0.95 is the usual GAE setting."""
    value_target: str = "lambda"
    """The return R the value head regresses onto: "nstep" (the A3C meta-RL fork's: the
    discounted n-step return to the end of the unroll, bootstrapped there, whatever
    ``gae_lambda``) or "lambda" (the TD(lambda) return ``A + V`` of the GAE advantages);
    they are equal when ``gae_lambda`` is 1."""
    loss_reduction: str = "mean"
    """How the per-step losses are reduced over the ``[T, B]`` unroll: "sum" (the A3C
    meta-RL fork's, and Mnih et al.'s accumulated gradients) or "mean" (OpenAI Baselines'
    A2C). With "sum" the gradient grows with ``T * num_envs``, which matters for
    ``max_grad_norm``, RMSProp/Adam epsilon and SGD learning rates."""
    baseline_cost: float = 0.5
    """beta_v, weight of the value loss ``0.5 * (R - V)^2`` (>= 0). The A3C meta-RL fork's
    value term ``0.05 * BETA_V * (R - V)^2`` is ``baseline_cost = 0.1 * BETA_V``."""
    entropy_start: float = 0.01
    """Entropy-bonus weight at the first update (>= 0)."""
    entropy_end: float = 0.01
    """Entropy-bonus weight at the last update (>= 0); the weight moves linearly from
    ``entropy_start`` to ``entropy_end`` over the run's total updates, then stays there."""
    reward_clipping: str = "none"
    """"none", "abs_one" (clip to [-1, 1]) or "soft_asymmetric"."""

    def __post_init__(self) -> None:
        check_number("discount", self.discount, 0.0, 1.0, True, False)
        check_number("gae_lambda", self.gae_lambda, 0.0, 1.0, False, False)
        check_choice("reward_clipping", self.reward_clipping, REWARD_CLIPPING)
        check_choice("value_target", self.value_target, VALUE_TARGETS)
        check_choice("loss_reduction", self.loss_reduction, LOSS_REDUCTIONS)
        self.check_learner_fields()
        for name in ("baseline_cost", "entropy_start", "entropy_end"):
            check_number(name, getattr(self, name), 0.0, math.inf, False, True)
