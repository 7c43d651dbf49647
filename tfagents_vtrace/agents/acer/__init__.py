"""ACER: actor-critic with experience replay, truncated importance sampling with bias
correction, Retrace and an efficient trust region (Wang et al. 2016,
https://arxiv.org/abs/1611.01224), discrete and continuous actions.

``SPEC`` (:class:`~tfagents_vtrace.agents.spec.AgentSpec`) is what the agent registry
(:mod:`tfagents_vtrace.agents`) returns: the config, the learner, ``network_config_for`` (adds the Q
head the action space needs) and the run agent (:class:`AcerAgent`, what the run driver runs:
on-policy unrolls + episodic replay, inline by default, asynchronous worker threads with
``num_workers``).
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.agents.acer.agent import AcerAgent
from tfagents_vtrace.agents.acer.config import AcerConfig, check_run
from tfagents_vtrace.agents.acer.learner import AcerLearner
from tfagents_vtrace.agents.acer.loss import acer_loss, project_policy_loss
from tfagents_vtrace.agents.acer.worker import AcerWorker
from tfagents_vtrace.agents.spec import AgentSpec


def network_config_for(network_config, agent_config: AcerConfig, spaces):
    """``network_config`` with ``q_head="discrete"`` for a Discrete action space and
    ``"stochastic_dueling"`` for a Box one (``spaces``: the environment's ``EnvSpaces``)."""
    import gymnasium as gym

    del agent_config
    discrete = isinstance(spaces.action, gym.spaces.Discrete)
    head = "discrete" if discrete else "stochastic_dueling"
    return dataclasses.replace(network_config, q_head=head)


SPEC = AgentSpec(
    "acer",
    AcerConfig,
    AcerAgent,
    network_config_for=network_config_for,
    check_run=check_run,
)

__all__ = [
    "SPEC",
    "AcerAgent",
    "AcerConfig",
    "AcerLearner",
    "AcerWorker",
    "acer_loss",
    "network_config_for",
    "project_policy_loss",
]
