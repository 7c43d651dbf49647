"""A3C: asynchronous advantage actor-critic on worker threads or Ray worker processes
(``backend="ray"``: :mod:`~tfagents_vtrace.agents.a3c.ray_workers`) (Mnih et al. 2016,
https://arxiv.org/abs/1602.01783), with the loss shared with A2C
(:mod:`tfagents_vtrace.agents.a2c.loss`).

``SPEC`` (:class:`~tfagents_vtrace.agents.spec.AgentSpec`) is what the agent registry
(:mod:`tfagents_vtrace.agents`) returns: the config, the learner (the global network + shared
optimizer; its ``train_step`` is a one-worker update) and the run agent (:class:`A3CAgent`,
the asynchronous workers that the run driver runs for ``--agent=a3c``).
"""

from tfagents_vtrace.agents.a3c.agent import A3CAgent
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import A3CLearner, SharedOptimizer, compute_gradients
from tfagents_vtrace.agents.a3c.worker import Worker
from tfagents_vtrace.agents.spec import AgentSpec

SPEC = AgentSpec("a3c", A3CConfig, A3CAgent)

__all__ = [
    "SPEC",
    "A3CAgent",
    "A3CConfig",
    "A3CLearner",
    "SharedOptimizer",
    "Worker",
    "compute_gradients",
]
