"""TAAC, TaacL and TaacQ hyperparameters (Yu et al., "TAAC: Temporally Abstract Actor-Critic
for Continuous Control", 2021, https://arxiv.org/abs/2104.06521).

Each field is a setting of the same name (a ``tfv-train`` flag, a ``tv.train`` keyword),
its flag generated from this class (type, default and the docstring under the field); the
fields TAAC shares with other agents (discount, reward scale, learning rate, gradient
clipping, XLA, the non-finite stop) come from
:class:`~tfagents_vtrace.agents.learner_config.AgentConfig`. Defaults follow ALF's
``TaacAlgorithmBase``
(https://github.com/HorizonRobotics/alf/blob/pytorch/alf/algorithms/taac_algorithm.py); two
departures from it are options:

* ``forced_switch_cuts`` (default False, ALF): the replay stores the *sampled* ``b`` as the
  rollout switch, so a ``max_repeat_steps`` forced switch does not cut the compare-through
  return. True stores the effective switch (sampled or forced).
* ``mask_last_steps`` (default False, ALF): the critic loss keeps the steps that end an
  episode (ALF's ``TAACTDLoss`` masks them only in its summaries; the per-step loss, zero at
  the window's last step, is averaged over the whole ``[T, B]`` window). True averages over
  the steps that do not end an episode.

``num_critic_replicas``, ``reward_dim``, ``reward_weights``, ``reward_discounts`` (ALF's
``num_critic_replicas``, ``reward_spec``, ``reward_weights`` and the list ``gamma`` of
``TAACTDLoss``), ``td_loss`` (ALF's ``td_error_loss_fn``) and ``target_entropy`` (ALF's
``target_entropy``: one value for both sub-policies, or one per sub-policy ``(b, action)``;
through the Python API also callables of the sub-policy's :class:`EntropySpec`) are ALF's
options with ALF's defaults. Measurements on Pendulum-v1: ``docs/results/pendulum.md``.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import ClassVar

from tfagents_vtrace.agents.learner_config import AgentConfig
from tfagents_vtrace.utils.validation import (
    check_choice,
    check_int,
    check_number,
    check_positive,
    check_sizes,
)

TRAJECTORIES = ("constant", "linear", "quadratic")
TD_LOSSES = ("squared", "huber")

EntropySpec = collections.namedtuple(
    "EntropySpec", ["shape", "minimum", "maximum", "is_continuous"]
)
EntropySpec.__doc__ = """The action spec of one sub-policy, what a ``target_entropy`` callable
is called on (ALF calls it on the sub-policy's ``BoundedTensorSpec``): the b choice is
``EntropySpec((), 0, 1, False)``, the action ``EntropySpec((A,), -1.0, 1.0, True)``."""

B_SPEC = EntropySpec((), 0, 1, False)


def action_spec(action_dim: int) -> EntropySpec:
    """The :class:`EntropySpec` of TAAC's actions (``[-1, 1]^A``)."""
    return EntropySpec((int(action_dim),), -1.0, 1.0, True)


def default_target_entropy(spec: EntropySpec, min_prob: float = 0.1) -> float:
    """ALF's default target entropy of ``spec``: continuous, a density concentrated on
    ``min_prob`` of each dimension's range, ``sum_i log((max - min) * min_prob)``; discrete with
    ``n`` values, ``1 - min_prob`` on one and ``min_prob`` spread over the others,
    ``-(1 - p) log(1 - p) - p log(p / (n - 1))``."""
    size = math.prod(spec.shape)
    if spec.is_continuous:
        return float(size * math.log((spec.maximum - spec.minimum) * min_prob))
    n, p = spec.maximum - spec.minimum + 1, min_prob
    return float(size * (-(1.0 - p) * math.log(1.0 - p) - p * math.log(p / (n - 1))))


def _is_number(x) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


@dataclasses.dataclass(frozen=True)
class TaacConfig(AgentConfig):
    """Every field of a TAAC run, validated in ``__post_init__`` (ValueError names the field).
    TAAC's optimizers are Adam (actor, critics, temperatures): it has no optimizer choice,
    reward clipping or entropy cost (the temperatures follow ``target_entropy``)."""

    # What the checkpoint and the replay archive are shaped by (a resume may not change it).
    RESUME_FIXED: ClassVar[tuple[str, ...]] = (
        "trajectory",
        "actor_hidden_sizes",
        "critic_hidden_sizes",
        "num_critic_replicas",
        "reward_dim",
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
    """ReLU MLP of each critic Q_i(s, tau)."""
    num_critic_replicas: int = 2
    """R: critics trained side by side on the same targets; their minimum is Q (ALF's
    num_critic_replicas; with reward_dim > 1 one critic per replica and reward dim)."""
    reward_dim: int = 1
    """D: reward dims. D > 1: the environment puts a [D] reward vector in each step's
    ``info["reward_vector"]`` (its scalar reward is only reported); each critic predicts one
    value per dim and Q is their reward_weights-weighted sum (ALF's multi-dim reward_spec)."""
    reward_weights: tuple[float, ...] | None = None
    """reward_dim > 1: weights of the per-dim values in Q for the b choice and the actor;
    the replica minimum of a dim with a negative weight is a maximum (None: all ones, the sum,
    as ALF)."""
    reward_discounts: tuple[float, ...] | None = None
    """reward_dim > 1: one discount per reward dim (ALF's list gamma of TAACTDLoss; None:
    ``discount`` for every dim)."""
    td_loss: str = "squared"
    """Critic loss per element: "squared" ((G - Q)^2, ALF's default element_wise_squared_loss)
    or "huber" (ALF's element_wise_huber_loss, smooth L1 with delta 1). The Python API also
    takes a callable ``(target, value) -> elementwise loss``."""
    mask_last_steps: bool = False
    """False (ALF): the critic loss averages over the whole window, steps that end an episode
    included (the per-step loss is zero at the window's last step). True: it averages over the
    steps that do not end an episode only."""
    forced_switch_cuts: bool = False
    """False (ALF): the replay stores the sampled b, so a max_repeat_steps forced switch does
    not cut the compare-through return. True: it stores the effective switch."""
    alpha_learning_rate: float | None = None
    """Adam learning rate of the two log-temperatures (None: ``learning_rate``)."""
    initial_alpha: float = 1.0
    """Initial value of both entropy temperatures (action and b)."""
    target_entropy: tuple[float, ...] | None = None
    """ALF's target_entropy: one value for both sub-policies, or two: ``b,action`` (None:
    ALF's defaults, ``H(1 - min_prob, min_prob)`` for b and ``A * log(2 * min_prob)`` for
    actions in [-1, 1]). The Python API also takes a callable of the sub-policy's
    ``EntropySpec`` (or a pair of None / numbers / callables)."""
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
    """Global-norm gradient clipping of each network's gradients (None or 0: none)."""
    jit_compile: bool = True
    """XLA-compile the train step and the acting step."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice("trajectory", self.trajectory, TRAJECTORIES)
        object.__setattr__(
            self, "actor_hidden_sizes", check_sizes("actor_hidden_sizes", self.actor_hidden_sizes)
        )
        object.__setattr__(
            self,
            "critic_hidden_sizes",
            check_sizes("critic_hidden_sizes", self.critic_hidden_sizes),
        )
        check_positive("initial_alpha", self.initial_alpha)
        if self.alpha_learning_rate is not None:
            check_positive("alpha_learning_rate", self.alpha_learning_rate)
        check_number("target_entropy_min_prob", self.target_entropy_min_prob, 0.0, 1.0)
        check_number("target_update_tau", self.target_update_tau, 0.0, 1.0, True, False)
        check_number("epsilon_greedy", self.epsilon_greedy, 0.0, 1.0, False, False)
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
        if not (self.td_loss in TD_LOSSES or callable(self.td_loss)):
            raise ValueError(
                f"td_loss: expected one of {TD_LOSSES} or a callable, received {self.td_loss!r}"
            )
        self._check_rewards()
        object.__setattr__(self, "target_entropy", self._checked_target_entropy())

    def _check_rewards(self) -> None:
        d = self.reward_dim
        for name in ("reward_weights", "reward_discounts"):
            value = getattr(self, name)
            if value is None:
                continue
            try:
                value = tuple(float(v) for v in value)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{name}: expected {d} numbers or None, received {value!r}"
                ) from None
            if d == 1 or len(value) != d or not all(math.isfinite(v) for v in value):
                raise ValueError(
                    f"{name}: expected None or reward_dim = {d} finite numbers (only with "
                    f"reward_dim > 1), received {getattr(self, name)!r}"
                )
            if name == "reward_discounts" and not all(0.0 <= v <= 1.0 for v in value):
                raise ValueError(f"{name}: expected numbers in [0, 1], received {value!r}")
            object.__setattr__(self, name, value)

    def _checked_target_entropy(self):
        """``target_entropy`` with lists as tuples and numbers as 1-tuples; raises on
        anything that is not None, a number, a callable or 1-2 of them."""
        value = self.target_entropy
        if value is None or callable(value):
            return value
        items = (value,) if _is_number(value) else value
        ok = isinstance(items, list | tuple) and len(items) in (1, 2)
        ok = ok and all(v is None or callable(v) or _is_number(v) for v in items)
        if not ok:
            raise ValueError(
                "target_entropy: expected None, a number, a callable or a pair (b, action) of "
                f"them, received {value!r}"
            )
        return tuple(float(v) if _is_number(v) else v for v in items)

    def _check_ints(self) -> None:
        check_int("target_update_period", self.target_update_period, 1)
        check_int("mini_batch_size", self.mini_batch_size, 1)
        check_int("mini_batch_length", self.mini_batch_length, 2)
        check_int("replay_capacity", self.replay_capacity, self.mini_batch_length)
        check_int("initial_collect_steps", self.initial_collect_steps, 0)
        check_int("train_interval", self.train_interval, 1)
        check_int("updates_per_train", self.updates_per_train, 1)
        check_int("num_critic_replicas", self.num_critic_replicas, 1)
        check_int("reward_dim", self.reward_dim, 1)
        if self.max_repeat_steps is not None:
            check_int("max_repeat_steps", self.max_repeat_steps, 1)

    @property
    def tau_order(self) -> int:
        """Number of [A]-vectors in a trajectory: 1 (a), 2 (a, v) or 3 (a, v, u)."""
        return TRAJECTORIES.index(self.trajectory) + 1

    def target_entropies(self, action_dim: int) -> tuple[float, float]:
        """``(b, action)`` target entropies, resolved as ALF's ``_set_target_entropy``: per
        sub-policy, None gives :func:`default_target_entropy` of its spec, a callable is
        called on its spec, a number is used as is; one entry applies to both."""
        value = self.target_entropy
        items = (value, value) if value is None or callable(value) else value
        if len(items) == 1:
            items = (items[0], items[0])
        out = []
        for item, spec in zip(items, (B_SPEC, action_spec(action_dim)), strict=True):
            if item is None:
                out.append(default_target_entropy(spec, self.target_entropy_min_prob))
            elif callable(item):
                out.append(float(item(spec)))
            else:
                out.append(float(item))
        return out[0], out[1]

    @property
    def resolved_reward_weights(self) -> tuple[float, ...]:
        """The ``reward_dim`` weights of the per-dim values (all ones when None)."""
        return self.reward_weights or (1.0,) * self.reward_dim

    @property
    def resolved_reward_discounts(self) -> tuple[float, ...]:
        """The ``reward_dim`` discounts (``discount`` for every dim when None)."""
        return self.reward_discounts or (float(self.discount),) * self.reward_dim

    def callables(self) -> list[str]:
        """The fields holding a callable (Python API only; a run's config.json cannot)."""
        names = []
        if callable(self.td_loss):
            names.append("td_loss")
        te = self.target_entropy
        if callable(te) or (isinstance(te, tuple) and any(callable(v) for v in te)):
            names.append("target_entropy")
        return names


def check_run(config: TaacConfig, run) -> None:
    """ValueError naming ``replay_capacity`` when TAAC's replay of ``config`` cannot fit in
    this machine's memory (:func:`tfagents_vtrace.replay.capacity.check_fits`): its ring
    buffers are allocated whole when the run starts, one step holding the fields of
    :func:`~tfagents_vtrace.agents.taac.rollout.replay_specs` (float32 observation, rewards,
    the rollout's trajectories). One environment of ``run`` is made to read its spaces.
    ValueError naming ``env_groups`` above 1: TAAC's rollout steps one vector."""
    import numpy as np

    if getattr(run, "env_groups", 1) > 1:
        raise ValueError(
            f"env_groups: TAAC's rollout steps its environments as one vector; received "
            f"{run.env_groups}, expected 1"
        )
    from tfagents_vtrace.agents.taac.rollout import replay_specs
    from tfagents_vtrace.replay import capacity

    spaces = capacity.env_spaces(run.env_id, run.env_kwargs)
    if spaces is None or spaces[0].shape is None or spaces[1].shape is None:
        return
    observation, action = spaces
    specs = replay_specs(
        observation.shape, config.tau_order, int(math.prod(action.shape)), config.reward_dim
    )
    step = sum(int(math.prod(s)) * np.dtype(t).itemsize for s, t in specs.values())
    what = f"{run.env_id}'s observation, rewards and the rollout's trajectories"
    capacity.check_fits("replay_capacity", config.replay_capacity, step, what)
