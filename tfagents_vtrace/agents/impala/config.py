"""IMPALA learner hyperparameters (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561).

The defaults learn small tasks of every action space with no tuning: Adam at a constant
1e-3 and advantages normalised per batch (so the entropy cost 0.01 means the same whatever
the reward scale), with the paper's baseline cost 0.5, global-norm clipping 40 and V-trace
thresholds 1. The paper's learner (RMSProp 0.99 / 0 / 0.1 at 6e-4 with a linear decay) is
the preset ``configs/impala_reference.cfg``; ``configs/`` holds tuned values per task. The
fields IMPALA shares with other agents (discount, rewards, optimizer, clipping, entropy
schedule, baseline cost) come from
:class:`~tfagents_vtrace.agents.learner_config.ActorCriticConfig`.

Sample reuse, on by default: four epochs of SGD over each learner batch in four minibatches
of whole unrolls, V-trace recomputed against the current policy at every step (V-trace is the
correction that makes the reuse sound), with the clipped-surrogate policy loss of PPO
(Schulman et al. 2017, https://arxiv.org/abs/1707.06347) on V-trace advantages, as RLlib's
APPO does. Without the clipping, reuse diverges; without the reuse, the policy of a solved
task drifts away from it (docs/defaults.md). ``policy_loss="vtrace"``, ``num_epochs=1`` and
``num_minibatches=1`` give the paper's one step per batch (the ``impala_reference`` preset).
Also: a KL penalty to the behaviour policy; value clipping; advantage normalisation; and a
replay of recent unrolls mixed into each batch (the IMPALA paper's replay experiment,
Section 5.2.2).
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.agents.learner_config import (
    ActorCriticConfig,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_positive,
)

POLICY_LOSSES = ("vtrace", "clipped")
MINIBATCH_UNITS = ("unrolls", "steps")


@dataclasses.dataclass(frozen=True)
class ImpalaConfig(ActorCriticConfig):
    """Hyperparameters of the IMPALA learner (losses, optimizer, compilation)."""

    rmsprop_epsilon: float = 0.1
    """RMSProp epsilon (> 0); IMPALA uses 0.1."""
    clip_rho_threshold: float | None = 1.0
    """rho-bar of V-trace (> 0), or None for no clipping."""
    clip_pg_rho_threshold: float | None = 1.0
    """Clipping of the policy-gradient importance weight (> 0), or None."""
    clip_c_threshold: float | None = 1.0
    """c-bar, the trace-cutting threshold (> 0), or None."""
    vtrace_lambda: float = 1.0
    """lambda in [0, 1] multiplying the trace coefficients c."""
    num_epochs: int = 4
    """Passes of minibatch SGD over each learner batch (>= 1); V-trace is recomputed with
    the current weights at every minibatch step."""
    num_minibatches: int = 4
    """Minibatches per epoch (>= 1): the batch's B columns (whole unrolls: every minibatch
    keeps the full time axis) are shuffled once per epoch and split into this many equal
    parts; B must be divisible by it."""
    minibatch_unit: str = "unrolls"
    """What a minibatch is made of. "unrolls": whole columns of ``[T, B]``, V-trace
    recomputed with the current weights at every SGD step (any network). "steps": single
    time steps shuffled across all unrolls, as PPO's minibatches are, with the V-trace
    targets and advantages computed over the whole batch with the current weights at the
    start of every epoch (feed-forward networks on one replica only; ``T * B`` must be
    divisible by ``num_minibatches``). Steps of one unroll are strongly correlated, so with
    few unrolls per batch "steps" makes far less noisy minibatches."""
    vtrace_every_epoch: bool = True
    """With ``minibatch_unit="steps"``: recompute the V-trace targets with the current weights
    at the start of every epoch (True), or compute them once per batch before its first SGD
    step, as PPO computes GAE once (False: one forward pass over the batch per update
    instead of one per epoch). Must stay True with "unrolls", which recomputes V-trace at
    every SGD step."""
    policy_loss: str = "clipped"
    """"vtrace" (IMPALA: ``-pg_adv * log pi``) or "clipped" (APPO: PPO's clipped surrogate
    ``-min(r * pg_adv, clip(r, 1 - clip_ratio, 1 + clip_ratio) * pg_adv)`` with
    ``r = pi(a|x) / pi_old(a|x)``, ``pi_old`` the learner's policy when the batch arrived)."""
    clip_ratio: float = 0.2
    """epsilon of the clipped surrogate (> 0); used when policy_loss="clipped"."""
    kl_cost: float = 0.0
    """Weight (>= 0) of a penalty ``KL(mu || pi)`` to the behaviour policy that acted."""
    value_clip: float | None = None
    """None, or c > 0: the value loss is ``0.5 * max((vs - V)^2, (vs - V_clip)^2)`` with
    ``V_clip = V_old + clip(V - V_old, -c, c)`` (PPO2's value clipping; ``V_old`` the values
    when the batch arrived). Value targets are in reward units after ``reward_scale``."""
    normalize_advantages: bool = True
    """Normalise the policy-gradient advantages of each minibatch to mean 0 and std 1 (over
    the steps of the loss mask): the policy step and the entropy cost then do not depend on
    the scale of the rewards."""
    replay_ratio: float = 0.0
    """Replayed unrolls per fresh unroll in each learner batch (>= 0; 1.0 makes half of every
    batch replay). Replayed unrolls keep their own behaviour policy and LSTM state, so
    V-trace corrects their staleness."""
    replay_unrolls: int = 0
    """Recent unrolls kept for replay (0: ``max(1, ceil(replay_ratio * batch_unrolls)) * 8``
    when replay_ratio > 0)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("clip_rho_threshold", "clip_pg_rho_threshold", "clip_c_threshold"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        check_number("vtrace_lambda", self.vtrace_lambda, 0.0, 1.0, False, False)
        check_int("num_epochs", self.num_epochs, 1)
        check_int("num_minibatches", self.num_minibatches, 1)
        check_choice("minibatch_unit", self.minibatch_unit, MINIBATCH_UNITS)
        check_bool("vtrace_every_epoch", self.vtrace_every_epoch)
        if not self.vtrace_every_epoch and self.minibatch_unit != "steps":
            raise ValueError(
                "vtrace_every_epoch: False needs minibatch_unit='steps' (whole-unroll "
                "minibatches recompute V-trace at every SGD step)"
            )
        check_choice("policy_loss", self.policy_loss, POLICY_LOSSES)
        check_positive("clip_ratio", self.clip_ratio)
        check_positive("kl_cost", self.kl_cost, allow_zero=True)
        if self.value_clip is not None:
            check_positive("value_clip", self.value_clip)
        check_bool("normalize_advantages", self.normalize_advantages)
        check_positive("replay_ratio", self.replay_ratio, allow_zero=True)
        check_int("replay_unrolls", self.replay_unrolls, 0)

    @property
    def needs_old_outputs(self) -> bool:
        """Whether the loss reads the learner's policy/values from before the update."""
        return self.policy_loss == "clipped" or self.value_clip is not None

    @property
    def sgd_steps(self) -> int:
        """Optimizer steps per learner batch: ``num_epochs * num_minibatches``."""
        return self.num_epochs * self.num_minibatches


def check_run(config: ImpalaConfig, run) -> None:
    """ValueError naming ``num_minibatches`` when a learner batch of ``run`` (``num_envs *
    batch_unrolls`` fresh unrolls plus the replayed ones, each ``num_envs`` columns wide)
    does not split into ``config.num_minibatches`` equal minibatches: checked before the run
    starts, not at its first update. ValueError naming ``replay_unrolls`` when that many
    unrolls cannot fit in this machine's memory (:func:`_check_replay_memory`)."""
    from tfagents_vtrace.replay.unrolls import replayed_per_batch

    if config.replay_unrolls:
        _check_replay_memory(config.replay_unrolls, run)

    n = config.num_minibatches
    unrolls = run.batch_unrolls + replayed_per_batch(config.replay_ratio, run.batch_unrolls)
    columns = run.num_envs * unrolls
    what = f"num_envs={run.num_envs} x {unrolls} unroll{'s' if unrolls > 1 else ''}"
    if config.minibatch_unit == "steps":
        steps = columns * run.unroll_length
        if steps % n:
            raise ValueError(
                f"num_minibatches: a batch of {steps} steps ({what} x unroll_length="
                f"{run.unroll_length}) does not split into {n} equal minibatches; choose "
                f"num_minibatches dividing {steps}"
            )
    elif columns % n:
        raise ValueError(
            f"num_minibatches: a batch of {columns} columns ({what}) does not split into {n} "
            f"equal minibatches; choose a num_envs divisible by {n}, or num_minibatches "
            f"dividing {columns}"
        )


def _check_replay_memory(unrolls: int, run) -> None:
    """ValueError naming ``replay_unrolls`` when ``unrolls`` kept unrolls of ``run`` cannot
    fit in memory (:func:`tfagents_vtrace.replay.capacity.check_fits`): each holds
    ``num_envs`` columns of ``unroll_length + 1`` observations and ``unroll_length`` actions,
    float32 rewards and two step flags (the policy's parameters and LSTM state come on top).
    One environment of ``run`` is made to read its spaces."""
    from tfagents_vtrace.replay import capacity

    spaces = capacity.env_spaces(run.env_id, run.env_kwargs)
    if spaces is None:
        return
    observation, action = (capacity.space_bytes(s) for s in spaces)
    t, b = run.unroll_length, run.num_envs
    per_unroll = b * ((t + 1) * observation + t * (action + 4 + 2))
    what = f"{b} columns of {t} steps of {run.env_id}"
    capacity.check_fits("replay_unrolls", unrolls, per_unroll, what, unit="unrolls")
