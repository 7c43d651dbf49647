"""ACER hyperparameters (Wang et al. 2016, "Sample Efficient Actor-Critic with Experience
Replay", https://arxiv.org/abs/1611.01224).

Each field is a setting of the same name (a ``tfv-train`` flag, a ``tv.train`` keyword),
its flag generated from this class (type, default and the docstring under the field).
The fields ACER shares with other agents (discount, rewards, optimizer, clipping, entropy
cost) come from :class:`~tfagents_vtrace.agents.learner_config.LearnerConfig`.

Defaults are chainerrl's ``ACER``
(https://github.com/chainer/chainerrl/blob/master/chainerrl/agents/acer.py): ``entropy_cost`` =
beta = 0.01, ``pi_loss_coef`` = 1, ``q_loss_coef`` = 0.5, trust region on with alpha = 0.99,
delta = 1, ``truncation_threshold`` = 10, ``n_times_replay`` = 8, ``replay_start_size`` =
10^4, ``normalize_loss_by_steps``, ``use_q_opc`` off, statistics decay 0.999 per step. The
shipped configs ``tfagents_vtrace/configs/acer_*.cfg`` set their tuned values explicitly.
Choices, and why (measurements: ``docs/results/cartpole.md``, ``docs/results/pendulum.md``):

* Discrete V: ``V = sum_a pi(a|x) Q(x, a)`` only, as the reference; a separate V head
  regressed on it (moving the shared torso) made CartPole solve later, so there is none.
* ``pi_loss_coef`` scales the entropy term too (the reference's ``pi_loss *= pi_loss_coef``
  after ``pi_loss -= beta H``).
* ``trust_region_params`` = "mean_var": the Gaussian trust region projects in
  phi = (mean, variance), chainerrl's ``GaussianDistribution.params``; "loc_scale" (phi =
  (mean, std)) is selectable and measured no different on Pendulum. Categorical policies use
  the logits either way (chainerrl's ``SoftmaxDistribution.params``).
* ``on_policy_importance_weights`` = False: the on-policy update is exactly on-policy, as
  the reference's ``update_on_policy`` (``action_distrib_mu=None``: rho = 1, no truncation,
  no bias correction, trace and V-target weights 1), and with workers its gradient is
  taken on the weights that acted (the local copy is synced after it, as chainerrl's
  ``sync_parameters``). True weights the unroll by pi/mu against the stored mu with
  truncation and bias correction, and a worker re-syncs its copy before the gradient
  (rho != 1 then; inline, mu = pi and both agree).
* ``replay_poisson`` = False: ``n_times_replay`` replay updates per on-policy update, the
  reference's fixed count; True draws the count from Poisson(``n_times_replay``), the
  paper's Algorithm 1 (``n <- Poisson(r)``).
* ``stats_decay`` = 0.999 per step, as the reference's ``average_value_decay``,
  ``average_entropy_decay`` and ``average_kl_decay``: ``average_value`` and
  ``average_entropy`` follow every acted step (those of the on-policy updates, in time
  order), ``average_kl`` every step of every update with the trust region on (each
  sequence's steps in reverse time order, as the reference's backward loop).
* Unshared models (chainerrl's ``ACERSeparateModel`` / ``ACERSDNSeparateModel``) are the
  network's ``q_hidden_sizes``; the stochastic dueling network's n is ``sdn_num_samples``
  and its advantage MLP ``sdn_hidden_sizes`` (:class:`~tfagents_vtrace.networks.NetworkConfig`).
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.agents.learner_config import (
    LearnerConfig,
    check_bool,
    check_choice,
    check_int,
    check_number,
    check_positive,
)

TRUST_REGION_PARAMS = ("mean_var", "loc_scale")


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
    check_positive("truncation_threshold", value)
    return float(value)


@dataclasses.dataclass(frozen=True)
class AcerConfig(LearnerConfig):
    """Hyperparameters of the ACER loss, its replay and its optimizer (defaults: the paper's
    and chainerrl's where they apply; flagfiles set the values that matter per task). The
    entropy bonus ``entropy_cost`` (beta) sits inside the policy loss."""

    learning_rate: float = 7e-4
    """Initial learning rate (> 0)."""
    t_max: int = 20
    """Steps per on-policy rollout (the actor's unroll length) and per replayed sequence."""
    num_workers: int = 0
    """0: synchronous batched training with one inline actor (default); N >= 1: N
    asynchronous workers, each with its own envs and local network (like A3C): threads, or
    Ray actor processes with ``backend="ray"``."""
    pi_loss_coef: float = 1.0
    """Weight of the policy loss: the (trust-region projected) policy-gradient term minus
    beta times the entropy, both scaled, as chainerrl's ``pi_loss_coef`` (>= 0)."""
    q_loss_coef: float = 0.5
    """Weight of the Q loss ``1/2 (Q_ret - Q)^2`` (and of the V loss
    ``1/2 (V_target - V)^2`` for continuous actions; discrete ACER has no V of its own)."""
    use_trust_region: bool = True
    """Project the policy gradient with ACER's efficient trust region (eq. 12)."""
    trust_region_alpha: float = 0.99
    """Decay of the exponentially averaged network: ``avg <- alpha avg + (1 - alpha) theta``."""
    trust_region_delta: float = 1.0
    """delta: bound on the linearised KL(avg || pi) change per step (> 0)."""
    trust_region_params: str = "mean_var"
    """Policy statistics phi of the Gaussian trust region: "mean_var" (mean and variance, the
    reference's) or "loc_scale" (mean and standard deviation). Categorical: the logits."""
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
    replay_start_size: int = 10_000
    """Replay updates start once this many transitions are stored."""
    n_times_replay: int = 8
    """Replay updates per on-policy update (the mean count with ``replay_poisson``)."""
    replay_poisson: bool = False
    """Draw the number of replay updates of each iteration from Poisson(n_times_replay), as
    the paper's Algorithm 1; False: exactly n_times_replay, as chainerrl."""
    replay_batch_size: int = 0
    """Sequences per replay update (0: the number of environments)."""
    disable_online_update: bool = False
    """Skip the on-policy update; learn only from replay (the data still enters the replay)."""
    on_policy_importance_weights: bool = False
    """False: the on-policy update uses rho = 1 with no truncation or bias correction and,
    with workers, the weights that acted (the reference). True: it weights the unroll by
    pi / mu against the stored mu like a replayed sequence, workers re-syncing first."""
    stats_decay: float = 0.999
    """Per-step decay of the ``average_value/entropy/kl`` statistics: value and entropy
    follow the acted (on-policy) steps, kl every trust-region step of every update."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "truncation_threshold", _threshold(self.truncation_threshold))
        super().__post_init__()
        check_number("retrace_lambda", self.retrace_lambda, 0.0, 1.0, False, False)
        check_positive("trust_region_delta", self.trust_region_delta)
        for name in ("trust_region_alpha", "stats_decay"):
            check_number(name, getattr(self, name), 0.0, 1.0, False, True)
        for name in ("pi_loss_coef", "q_loss_coef"):
            check_positive(name, getattr(self, name), allow_zero=True)
        check_int("t_max", self.t_max, 1)
        check_int("num_workers", self.num_workers, 0)
        check_int("replay_capacity", self.replay_capacity, 1)
        check_int("replay_start_size", self.replay_start_size, 0)
        check_int("n_times_replay", self.n_times_replay, 0)
        check_int("replay_batch_size", self.replay_batch_size, 0)
        check_choice("trust_region_params", self.trust_region_params, TRUST_REGION_PARAMS)
        for name in (
            "use_trust_region", "use_q_opc", "normalize_loss_by_steps", "replay_poisson",
            "disable_online_update", "on_policy_importance_weights",
        ):  # fmt: skip
            check_bool(name, getattr(self, name))
        if self.disable_online_update and self.n_times_replay == 0:
            raise ValueError(
                "disable_online_update: expected n_times_replay >= 1 when the online update is "
                "disabled, received n_times_replay=0"
            )


def check_run(config: AcerConfig, run) -> None:
    """ValueError naming ``replay_capacity`` when the episodic replay of ``config`` cannot fit
    in this machine's memory (:func:`tfagents_vtrace.replay.capacity.check_fits`): a step
    holds the observation, the action, the behaviour policy's parameters (the logits of a
    Discrete action space, the mean and scale of a Box one, float32), the float32 reward and
    the two step flags. One environment of ``run`` is made to read its spaces."""
    import math

    import gymnasium as gym

    from tfagents_vtrace.replay import capacity

    spaces = capacity.env_spaces(run.env_id, run.env_kwargs)
    if spaces is None:
        return
    observation, action = spaces
    if isinstance(action, gym.spaces.Discrete):
        params = int(action.n) * 4
    else:
        params = 2 * int(math.prod(action.shape or ())) * 4
    step = capacity.space_bytes(observation) + capacity.space_bytes(action) + params + 4 + 2
    what = f"{run.env_id}'s observation and action, the policy's parameters, reward and flags"
    capacity.check_fits("replay_capacity", config.replay_capacity, step, what)
