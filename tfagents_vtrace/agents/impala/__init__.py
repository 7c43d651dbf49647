"""IMPALA: V-trace off-policy actor-critic (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561).

``Config`` and ``Learner`` are the names the agent registry (:mod:`tfagents_vtrace.agents`)
looks up.
"""

from tfagents_vtrace.agents.impala.config import ImpalaConfig, check_run
from tfagents_vtrace.agents.impala.learner import (
    METRIC_KEYS,
    ImpalaLearner,
    LossTerms,
    impala_loss,
    loss_terms,
    masked_means,
)
from tfagents_vtrace.agents.spec import AgentSpec

Config = ImpalaConfig
Learner = ImpalaLearner

SPEC = AgentSpec(
    "impala", ImpalaConfig, Learner=ImpalaLearner, check_run=check_run, activation="relu"
)

__all__ = [
    "SPEC",
    "METRIC_KEYS",
    "Config",
    "ImpalaConfig",
    "ImpalaLearner",
    "Learner",
    "LossTerms",
    "impala_loss",
    "loss_terms",
    "masked_means",
]
