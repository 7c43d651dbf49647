"""Flags of TAAC, TaacL and TaacQ (`tfagents_vtrace.agents.taac`), declared by `define_train_flags`.

A flag named like a field of the agent's ``Config`` fills it when given (see
``experiments.common.dataclass_from_flags``). Flags shared with other agents (``discount``,
``learning_rate``, ``max_grad_norm``, ``reward_scale``, ``jit_compile``...) are declared once
in ``experiments.common`` and not repeated here. ``TaacConfig`` documents each field.
"""

from __future__ import annotations

from absl import flags


def _define(kind: str, name: str, default, help_text: str, **kw) -> None:
    """Declares ``--name`` unless another agent's module already did (same-named flags fill
    the same-named Config field of whichever agent runs, e.g. ``replay_capacity``)."""
    if name not in flags.FLAGS:
        getattr(flags, f"DEFINE_{kind}")(name=name, default=default, help=help_text, **kw)


def define_flags() -> None:
    """Declares the taac-only flags."""
    _define(
        "enum", "trajectory", "constant",
        "TAAC trajectory: constant (TAAC), linear (TaacL), quadratic (TaacQ).",
        enum_values=["constant", "linear", "quadratic"],
    )  # fmt: skip
    _define("bool", "inverse_mode", True, "TaacL/TaacQ: the actor sample is the next action.")
    _define("list", "actor_hidden_sizes", ["256", "256"], "TAAC actor MLP sizes.")
    _define("list", "critic_hidden_sizes", ["256", "256"], "TAAC critic MLP sizes.")
    _define("float", "alpha_learning_rate", None, "TAAC temperature lr (default: lr).")
    _define("float", "initial_alpha", 1.0, "TAAC initial entropy temperatures.")
    _define("float", "target_entropy", None, "TAAC action target entropy (default ALF's).")
    _define("float", "b_target_entropy", None, "TAAC b target entropy (default ALF's).")
    _define("float", "target_entropy_min_prob", 0.1, "min_prob of the default entropies.")
    _define("float", "target_update_tau", 0.05, "Soft-update factor of target critics.")
    _define("integer", "target_update_period", 1, "Updates between target soft updates.")
    _define(
        "list", "b1_advantage_clipping", None, "TAAC: min,max clipping of Q(s,tau_hat)-Q(s,tau^-)."
    )
    _define("integer", "max_repeat_steps", None, "TAAC: force a new action after N repeats.")
    _define("bool", "randomize_first_state_tau", False, "TAAC: random tau at episode start.")
    _define("float", "epsilon_greedy", 0.1, "TAAC evaluation epsilon per stage.")
    _define("integer", "mini_batch_size", 256, "TAAC windows per update.")
    _define("integer", "mini_batch_length", 4, "TAAC steps per replay window.")
    _define("integer", "replay_capacity", 100_000, "TAAC replay capacity (env steps).")
    _define("integer", "initial_collect_steps", 1000, "TAAC random steps before training.")
    _define("integer", "train_interval", 1, "TAAC vector steps between training calls.")
    _define("integer", "updates_per_train", 1, "TAAC updates per compiled training call.")
