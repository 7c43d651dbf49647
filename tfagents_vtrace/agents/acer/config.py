"""ACER hyperparameters (Wang et al. 2016, "Sample Efficient Actor-Critic with Experience
Replay", https://arxiv.org/abs/1611.01224).

Each field is an ``experiments.train`` flag of the same name, generated from this class
(type, default and the docstring under the field) by ``experiments.config_flags``.
The optimizer, clipping, XLA and non-finite fields come from
:class:`~tfagents_vtrace.agents.learner_config.LearnerConfig`.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents.learner_config import (
    LearnerConfig,
    check_bool,
    check_choice,
    check_int,
    check_number,
)
from tfagents_vtrace.agents.loss_inputs import REWARD_CLIPPING


def _threshold(value) -> float | None:
    """``truncation_threshold`` from a number, None, or the flag strings "None"/"none"/"10"."""
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("none", ""):
            return None
        try:
            value = float(text)
        except ValueError:
            raise ValueError(
                f"truncation_threshold: expected a number > 0 or None, received {value!r}"
            ) from None
    if value is None:
        return None
    check_number("truncation_threshold", value, 0.0, math.inf, True, True)
    return float(value)


@dataclasses.dataclass(frozen=True)
class AcerConfig(LearnerConfig):
    """Hyperparameters of the ACER loss, its replay and its optimizer (defaults: the paper's
    and chainerrl's where they apply; flagfiles set the values that matter per task)."""

    optimizer: str = "adam"
    """"rmsprop" or "adam"."""
    discount: float = 0.99
    """gamma in (0, 1]."""
    t_max: int = 20
    """Steps per on-policy rollout (the actor's unroll length) and per replayed sequence."""
    num_workers: int = 0
    """0: synchronous batched training with one inline actor (default); N >= 1: N
    asynchronous worker threads, each with its own envs and local network (like A3C)."""
    entropy_cost: float = 0.01
    """beta: weight of the entropy bonus (>= 0)."""
    pi_loss_coef: float = 1.0
    """Weight of the (trust-region projected) policy loss (>= 0)."""
    q_loss_coef: float = 0.5
    """Weight of the Q loss ``1/2 (Q_ret - Q)^2`` (and the V loss for continuous actions)."""
    use_trust_region: bool = True
    """Project the policy gradient with ACER's efficient trust region (eq. 12)."""
    trust_region_alpha: float = 0.99
    """Decay of the exponentially averaged network: ``avg <- alpha avg + (1 - alpha) theta``."""
    trust_region_delta: float = 1.0
    """delta: bound on the linearised KL(avg || pi) change per step (> 0)."""
    truncation_threshold: float | None = 10.0
    """c: importance weights are truncated at c with the bias correction; None: plain IS."""
    use_q_opc: bool = False
    """Use ``Q_opc`` (no importance weights) as the policy-gradient target (ACER recommends
    it for continuous actions); ``Q_ret`` otherwise."""
    retrace_lambda: float = 1.0
    """lambda of the Retrace trace coefficients (ACER: 1)."""
    normalize_loss_by_steps: bool = True
    """Mean of the per-step losses over T x B (True) or sum over T, mean over B (False)."""
    replay_capacity: int = 100_000
    """Transitions kept in the episodic replay (whole oldest episodes are evicted)."""
    replay_start_size: int = 1_000
    """Replay updates start once this many transitions are stored."""
    n_times_replay: int = 4
    """Replay updates per on-policy update."""
    replay_batch_size: int = 0
    """Sequences per replay update (0: the number of environments)."""
    disable_online_update: bool = False
    """Skip the on-policy update; learn only from replay (the data still enters the replay)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before clipping."""
    reward_clipping: str = "none"
    """"none", "abs_one" or "soft_asymmetric"."""
    stats_decay: float = 0.99
    """Per-update decay of the ``average_value/entropy/kl`` statistics (exponential averages)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "truncation_threshold", _threshold(self.truncation_threshold))
        check_number("discount", self.discount, 0.0, 1.0, True, False)
        self.check_learner_fields()
        check_number("retrace_lambda", self.retrace_lambda, 0.0, 1.0, False, False)
        check_number("trust_region_delta", self.trust_region_delta, 0.0, math.inf, True, True)
        check_number("reward_scale", self.reward_scale, 0.0, math.inf, True, True)
        for name in ("trust_region_alpha", "stats_decay"):
            check_number(name, getattr(self, name), 0.0, 1.0, False, True)
        for name in ("entropy_cost", "pi_loss_coef", "q_loss_coef"):
            check_number(name, getattr(self, name), 0.0, math.inf, False, True)
        check_int("t_max", self.t_max, 1)
        check_int("num_workers", self.num_workers, 0)
        check_int("replay_capacity", self.replay_capacity, 1)
        check_int("replay_start_size", self.replay_start_size, 0)
        check_int("n_times_replay", self.n_times_replay, 0)
        check_int("replay_batch_size", self.replay_batch_size, 0)
        check_choice("reward_clipping", self.reward_clipping, REWARD_CLIPPING)
        for name in ("use_trust_region", "use_q_opc", "normalize_loss_by_steps"):
            check_bool(name, getattr(self, name))
        check_bool("disable_online_update", self.disable_online_update)
        if self.disable_online_update and self.n_times_replay == 0:
            raise ValueError(
                "disable_online_update: expected n_times_replay >= 1 when the online update is "
                "disabled, received n_times_replay=0"
            )
