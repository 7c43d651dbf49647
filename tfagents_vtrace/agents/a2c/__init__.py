"""A2C: synchronous advantage actor-critic with n-step returns or GAE (Mnih et al. 2016,
https://arxiv.org/abs/1602.01783; Schulman et al. 2015, https://arxiv.org/abs/1506.02438).

``SPEC`` (:class:`~tfagents_vtrace.agents.spec.AgentSpec`) is what the agent registry
(:mod:`tfagents_vtrace.agents`) returns: the config and the learner the actor-learner feeds.
The loss module is shared with A3C (:mod:`tfagents_vtrace.agents.a3c`).
"""

from tfagents_vtrace.agents.a2c.config import A2CConfig
from tfagents_vtrace.agents.a2c.learner import A2CLearner
from tfagents_vtrace.agents.a2c.loss import METRIC_KEYS, a2c_loss
from tfagents_vtrace.agents.optimization import entropy_coefficient
from tfagents_vtrace.agents.spec import AgentSpec
from tfagents_vtrace.runtime.actor_learner import actor_learner

SPEC = AgentSpec("a2c", A2CConfig, actor_learner(A2CLearner))

__all__ = [
    "SPEC",
    "METRIC_KEYS",
    "A2CConfig",
    "A2CLearner",
    "a2c_loss",
    "entropy_coefficient",
]
