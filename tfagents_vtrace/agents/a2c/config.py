"""A2C hyperparameters (Mnih et al. 2016, https://arxiv.org/abs/1602.01783; GAE: Schulman et
al. 2015, https://arxiv.org/abs/1506.02438; meta-RL settings: Wang et al. 2016,
https://arxiv.org/abs/1611.05763).

Field names equal the ``tfv-train`` flag names they come from, so the launcher can
fill the dataclass from same-named flags. The defaults learn small tasks with no tuning
(Adam at 1e-3, GAE lambda 0.95 with TD(lambda) value targets, per-step mean losses, as
OpenAI Baselines' A2C); the A3C meta-RL fork's loss (n-step targets, summed losses) is the
preset ``configs/a2c_reference.cfg``. The fields A2C shares with other agents (discount,
rewards, optimizer, clipping, entropy schedule, baseline cost) come from
:class:`~tfagents_vtrace.agents.learner_config.ActorCriticConfig`; the A3C meta-RL fork's
value term ``0.05 * BETA_V * (R - V)^2`` is ``baseline_cost = 0.1 * BETA_V``.
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.agents.learner_config import (
    ActorCriticConfig,
    check_bool,
    check_choice,
    check_number,
    check_positive,
)

VALUE_TARGETS = ("nstep", "lambda")
LOSS_REDUCTIONS = ("sum", "mean")


@dataclasses.dataclass(frozen=True)
class A2CConfig(ActorCriticConfig):
    """Hyperparameters of the advantage actor-critic loss and its optimizer."""

    max_grad_norm: float | None = 0.5
    """Global-norm gradient clipping threshold (>= 0); 0 or None disables clipping."""
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
    normalize_advantages: bool = False
    """Normalise the policy-gradient advantages of each update to mean 0 and std 1 over the
    unmasked steps (per replica under a distribution strategy), as Stable-Baselines3's
    ``normalize_advantage``; the value targets are unchanged."""
    policy_mean_cost: float = 0.0
    """Weight (>= 0) of a penalty ``0.5 * sum_a loc_a^2`` on the Gaussian policy's mean
    (for "tanh_gaussian" the pre-tanh mean), reduced over the unroll as the other loss
    terms (``loss_reduction``); SAC's ``mean_reg`` (Haarnoja et al. 2018,
    https://arxiv.org/abs/1801.01290, v1: 1e-3). It keeps a tanh-squashed mean from running
    out into the saturated tails, where the censored log-probability's gradient fades. 0
    (the default) adds nothing; > 0 needs a Gaussian policy head ("gaussian" or
    "tanh_gaussian"), whose head is known once the environment is (``policy_head="auto"``):
    the loss refuses another head with a ValueError naming this field when it is first
    traced (the first update)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_number("gae_lambda", self.gae_lambda, 0.0, 1.0, False, False)
        check_choice("value_target", self.value_target, VALUE_TARGETS)
        check_choice("loss_reduction", self.loss_reduction, LOSS_REDUCTIONS)
        check_bool("normalize_advantages", self.normalize_advantages)
        check_positive("policy_mean_cost", self.policy_mean_cost, allow_zero=True)
