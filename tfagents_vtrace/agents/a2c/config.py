"""A2C hyperparameters (Mnih et al. 2016, https://arxiv.org/abs/1602.01783; GAE: Schulman et
al. 2015, https://arxiv.org/abs/1506.02438; meta-RL settings: Wang et al. 2016,
https://arxiv.org/abs/1611.05763).

Field names equal the ``experiments.train`` flag names they come from, so the launcher can
fill the dataclass from same-named flags. Flag defaults override these defaults: the
flagfiles under ``experiments/configs/a2c_*.cfg`` set every value that matters.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents.common import LR_DECAYS, OPTIMIZERS, REWARD_CLIPPING


def _number(name: str, value, low: float, high: float, low_open: bool, high_open: bool) -> None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        lb, hb = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name}: expected a number in {lb}{low}, {high}{hb}, received {value!r}")


def _choice(name: str, value, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, received {value!r}")


@dataclasses.dataclass(frozen=True)
class A2CConfig:
    """Hyperparameters of the advantage actor-critic loss and its optimizer."""

    discount: float = 0.99
    """gamma in (0, 1]: per-step discount; episode ends cut it to 0."""
    gae_lambda: float = 1.0
    """lambda in [0, 1] of GAE; 1.0 gives the n-step returns of A3C (bootstrapped at the end
    of the unroll), 0.95 is the usual GAE setting."""
    learning_rate: float = 7e-4
    """Initial learning rate (> 0)."""
    lr_decay: str = "none"
    """"none" or "linear" (to 0 over the run's total updates)."""
    optimizer: str = "rmsprop"
    """"rmsprop" (A3C paper, shared statistics) or "adam"."""
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
    max_grad_norm: float = 0.5
    """Global-norm gradient clipping threshold (>= 0); 0 disables clipping."""
    baseline_cost: float = 0.5
    """beta_v, weight of the value loss ``0.5 * (R - V)^2`` (>= 0)."""
    entropy_start: float = 0.01
    """Entropy-bonus weight at the first update (>= 0)."""
    entropy_end: float = 0.01
    """Entropy-bonus weight at the last update (>= 0); the weight moves linearly from
    ``entropy_start`` to ``entropy_end`` over the run's total updates, then stays there."""
    reward_clipping: str = "none"
    """"none", "abs_one" (clip to [-1, 1]) or "soft_asymmetric"."""
    jit_compile: bool = False
    """Compile the train step with XLA (single-replica strategies only)."""
    max_nonfinite_updates: int = 10
    """Training stops after this many consecutive updates with a non-finite loss/gradient."""

    def __post_init__(self) -> None:
        _number("discount", self.discount, 0.0, 1.0, True, False)
        _number("gae_lambda", self.gae_lambda, 0.0, 1.0, False, False)
        _number("learning_rate", self.learning_rate, 0.0, math.inf, True, True)
        _choice("lr_decay", self.lr_decay, LR_DECAYS)
        _choice("optimizer", self.optimizer, OPTIMIZERS)
        _choice("reward_clipping", self.reward_clipping, REWARD_CLIPPING)
        for name in ("rmsprop_decay", "rmsprop_momentum", "adam_beta1", "adam_beta2"):
            _number(name, getattr(self, name), 0.0, 1.0, False, True)
        for name in ("rmsprop_epsilon", "adam_epsilon"):
            _number(name, getattr(self, name), 0.0, math.inf, True, True)
        for name in ("max_grad_norm", "baseline_cost", "entropy_start", "entropy_end"):
            _number(name, getattr(self, name), 0.0, math.inf, False, True)
        if not isinstance(self.jit_compile, bool):
            raise ValueError(f"jit_compile: expected a bool, received {self.jit_compile!r}")
        n = self.max_nonfinite_updates
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"max_nonfinite_updates: expected an int >= 1, received {n!r}")
