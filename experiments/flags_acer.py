"""Flags of ACER (`tfagents_vtrace.agents.acer`), declared by `define_train_flags`.

A flag named like a field of the agent's ``Config`` fills it when given (see
``experiments.common.dataclass_from_flags``). Flags shared with other agents (``discount``,
``learning_rate``, ``num_workers``, ``t_max``, ``entropy_cost``, ``max_grad_norm``,
``optimizer``, ``reward_scale``...) are declared once in ``experiments.common`` and not
repeated here. ``AcerConfig`` documents every field.
"""

from __future__ import annotations

from absl import flags


def define_flags() -> None:
    """Declares the acer-only flags."""
    flags.DEFINE_float("pi_loss_coef", 1.0, "ACER: policy-loss weight.")
    flags.DEFINE_float("q_loss_coef", 0.5, "ACER: Q (and V) loss weight.")
    flags.DEFINE_bool("use_trust_region", True, "ACER: efficient trust region (eq. 12).")
    flags.DEFINE_float("trust_region_alpha", 0.99, "ACER: decay of the average network.")
    flags.DEFINE_float("trust_region_delta", 1.0, "ACER: trust-region delta.")
    flags.DEFINE_string(
        "truncation_threshold", "10", "ACER: importance-weight truncation c ('None': off)."
    )
    flags.DEFINE_bool("use_q_opc", False, "ACER: Q_opc as the policy-gradient target.")
    flags.DEFINE_float("retrace_lambda", 1.0, "ACER: Retrace lambda.")
    flags.DEFINE_bool("normalize_loss_by_steps", True, "ACER: mean (not sum) over time steps.")
    flags.DEFINE_integer("replay_capacity", 100_000, "ACER: replay capacity (transitions).")
    flags.DEFINE_integer("replay_start_size", 1_000, "ACER: transitions before replay updates.")
    flags.DEFINE_integer("n_times_replay", 4, "ACER: replay updates per on-policy update.")
    flags.DEFINE_integer("replay_batch_size", 0, "ACER: sequences per replay update (0: envs).")
    flags.DEFINE_bool("disable_online_update", False, "ACER: learn from replay only.")
    flags.DEFINE_float("stats_decay", 0.99, "ACER: decay of the average_* statistics.")
