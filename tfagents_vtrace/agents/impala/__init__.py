"""IMPALA: V-trace off-policy actor-critic (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561).

``SPEC`` (:class:`~tfagents_vtrace.agents.spec.AgentSpec`) is what the agent registry
(:mod:`tfagents_vtrace.agents`) returns: the config and the learner the actor-learner feeds.
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
from tfagents_vtrace.runtime.actor_learner import actor_learner

SPEC = AgentSpec(
    "impala", ImpalaConfig, actor_learner(ImpalaLearner), check_run=check_run, activation="relu"
)

__all__ = [
    "SPEC",
    "METRIC_KEYS",
    "ImpalaConfig",
    "ImpalaLearner",
    "LossTerms",
    "impala_loss",
    "loss_terms",
    "masked_means",
]
