"""TAAC, TaacL and TaacQ hyperparameters (Yu et al., "TAAC: Temporally Abstract Actor-Critic
for Continuous Control", 2021, https://arxiv.org/abs/2104.06521).

Each field is an ``experiments.train`` flag of the same name, generated from this class
(type, default and the docstring under the field) by ``experiments.config_flags``.
Defaults follow ALF's ``TaacAlgorithmBase``.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from tfagents_vtrace.validation import check_int as _int_at_least
from tfagents_vtrace.validation import check_positive as _positive
from tfagents_vtrace.validation import check_sizes

TRAJECTORIES = ("constant", "linear", "quadratic")


@dataclasses.dataclass(frozen=True)
class TaacConfig:
    """Every field of a TAAC run, validated in ``__post_init__`` (ValueError names the field)."""

    # What the checkpoint and the replay archive are shaped by (a resume may not change it).
    RESUME_FIXED: ClassVar[tuple[str, ...]] = (
        "trajectory",
        "actor_hidden_sizes",
        "critic_hidden_sizes",
        "replay_capacity",
    )
    RUN_RESUME_FIXED: ClassVar[tuple[str, ...]] = ("num_envs",)

    trajectory: str = "constant"
    """"constant" (TAAC: action repetition), "linear" (TaacL) or "quadratic" (TaacQ)."""
    inverse_mode: bool = True
    """TaacL/TaacQ: a new actor sample is the next action (derivatives inferred); False: it is
    the new first (TaacL) or second (TaacQ) derivative."""
    actor_hidden_sizes: tuple[int, ...] = (256, 256)
    """ReLU MLP of the actor pi(a | s, tau^-)."""
    critic_hidden_sizes: tuple[int, ...] = (256, 256)
    """ReLU MLP of each of the twin critics Q(s, tau)."""
    discount: float = 0.99
    """gamma in [0, 1]: per-step discount of the critics' targets."""
    learning_rate: float = 1e-3
    """Adam learning rate of the actor and the critics."""
    alpha_learning_rate: float | None = None
    """Adam learning rate of the two log-temperatures (None: ``learning_rate``)."""
    initial_alpha: float = 1.0
    """Initial value of both entropy temperatures (action and b)."""
    target_entropy: float | None = None
    """Target entropy of the action policy (None: ALF's default, ``A * log(2 * min_prob)``
    for actions in [-1, 1])."""
    b_target_entropy: float | None = None
    """Target entropy of the act-or-repeat choice b (None: the entropy of
    ``(1 - min_prob, min_prob)``)."""
    target_entropy_min_prob: float = 0.1
    """``min_prob`` of ALF's default target entropies."""
    target_update_tau: float = 0.05
    """Soft-update factor of the target critics."""
    target_update_period: int = 1
    """Updates between soft updates of the target critics."""
    b1_advantage_clipping: tuple[float, float] | None = None
    """Clip ``Q(s, tau_hat) - Q(s, tau^-)`` to ``[min, max]`` before the b softmax."""
    max_repeat_steps: int | None = None
    """Force a new trajectory after this many steps (rollout and evaluation only)."""
    randomize_first_state_tau: bool = False
    """Start each episode from a uniformly random tau instead of zeros."""
    epsilon_greedy: float = 0.1
    """Evaluation: sample (instead of taking the mode) with this probability, per stage."""
    mini_batch_size: int = 256
    """B: windows per gradient update."""
    mini_batch_length: int = 4
    """T: steps per replay window (the compare-through return looks up to T-1 ahead)."""
    replay_capacity: int = 100_000
    """Replay capacity in environment steps (split evenly over the environments)."""
    initial_collect_steps: int = 1000
    """Environment steps with uniform random actions and b before training starts."""
    train_interval: int = 1
    """Vector-env steps between training calls."""
    updates_per_train: int = 1
    """Gradient updates per training call (one compiled call runs them all)."""
    max_grad_norm: float | None = None
    """Global-norm gradient clipping per network (None or 0: none)."""
    reward_scale: float = 1.0
    """Rewards are multiplied by this before learning."""
    jit_compile: bool = True
    """XLA-compile the train step and the acting step."""
    max_nonfinite_updates: int = 10
    """An update with a non-finite loss or gradient is skipped; the run stops after this many
    in a row (the run driver's policy, as for every agent)."""

    def __post_init__(self) -> None:
        if self.trajectory not in TRAJECTORIES:
            raise ValueError(
                f"trajectory: expected one of {TRAJECTORIES}, received {self.trajectory!r}"
            )
        object.__setattr__(
            self, "actor_hidden_sizes", check_sizes("actor_hidden_sizes", self.actor_hidden_sizes)
        )
        object.__setattr__(
            self,
            "critic_hidden_sizes",
            check_sizes("critic_hidden_sizes", self.critic_hidden_sizes),
        )
        if not (isinstance(self.discount, int | float) and 0.0 <= self.discount <= 1.0):
            raise ValueError(f"discount: expected a number in [0, 1], received {self.discount!r}")
        for name in ("learning_rate", "initial_alpha", "reward_scale"):
            _positive(name, getattr(self, name))
        if self.alpha_learning_rate is not None:
            _positive("alpha_learning_rate", self.alpha_learning_rate)
        if not 0.0 < self.target_entropy_min_prob < 1.0:
            raise ValueError(
                "target_entropy_min_prob: expected a number in (0, 1), received "
                f"{self.target_entropy_min_prob!r}"
            )
        if not 0.0 < self.target_update_tau <= 1.0:
            raise ValueError(
                f"target_update_tau: expected a number in (0, 1], received "
                f"{self.target_update_tau!r}"
            )
        if not 0.0 <= self.epsilon_greedy <= 1.0:
            raise ValueError(
                f"epsilon_greedy: expected a number in [0, 1], received {self.epsilon_greedy!r}"
            )
        self._check_ints()
        clip = self.b1_advantage_clipping
        if clip is not None:
            clip = tuple(float(c) for c in clip)
            if len(clip) != 2 or not clip[0] <= clip[1]:
                raise ValueError(
                    f"b1_advantage_clipping: expected (min, max) with min <= max, received "
                    f"{self.b1_advantage_clipping!r}"
                )
            object.__setattr__(self, "b1_advantage_clipping", clip)
        if self.max_grad_norm is not None and not math.isfinite(self.max_grad_norm):
            raise ValueError(
                f"max_grad_norm: expected a finite number, received {self.max_grad_norm!r}"
            )

    def _check_ints(self) -> None:
        _int_at_least("target_update_period", self.target_update_period, 1)
        _int_at_least("mini_batch_size", self.mini_batch_size, 1)
        _int_at_least("mini_batch_length", self.mini_batch_length, 2)
        _int_at_least("replay_capacity", self.replay_capacity, self.mini_batch_length)
        _int_at_least("initial_collect_steps", self.initial_collect_steps, 0)
        _int_at_least("train_interval", self.train_interval, 1)
        _int_at_least("updates_per_train", self.updates_per_train, 1)
        _int_at_least("max_nonfinite_updates", self.max_nonfinite_updates, 1)
        if self.max_repeat_steps is not None:
            _int_at_least("max_repeat_steps", self.max_repeat_steps, 1)

    @property
    def tau_order(self) -> int:
        """Number of [A]-vectors in a trajectory: 1 (a), 2 (a, v) or 3 (a, v, u)."""
        return TRAJECTORIES.index(self.trajectory) + 1

    def action_target_entropy(self, action_dim: int) -> float:
        """The action policy's target entropy for ``action_dim`` actions in [-1, 1]."""
        if self.target_entropy is not None:
            return float(self.target_entropy)
        return float(action_dim * math.log(2.0 * self.target_entropy_min_prob))

    def beta_target_entropy(self) -> float:
        """The b policy's target entropy: ``H(1 - min_prob, min_prob)`` by default."""
        if self.b_target_entropy is not None:
            return float(self.b_target_entropy)
        p = self.target_entropy_min_prob
        return float(-(1.0 - p) * math.log(1.0 - p) - p * math.log(p))
