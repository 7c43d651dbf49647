"""TAAC, TaacL and TaacQ: temporally abstract actor-critic (Yu et al. 2021,
https://arxiv.org/abs/2104.06521).

``SPEC`` (:class:`~tfagents_vtrace.agents.spec.AgentSpec`) is what the agent registry
(:mod:`tfagents_vtrace.agents`) returns: the config (:class:`TaacConfig`, ``trajectory`` selects
TAAC/TaacL/TaacQ), the learner (:class:`TaacLearner`: networks, optimizers, the compiled
update), the run agent (:class:`TaacAgent`, the replay-driven agent that the run driver runs
for ``tfv-train --agent=taac``) and ``restore_policy`` (the exported policy of a run
directory, :class:`~tfagents_vtrace.agents.taac.export.TaacPolicyModule`, for ``tfv-export``).
"""

from tfagents_vtrace.agents.spec import AgentSpec
from tfagents_vtrace.agents.taac.agent import TaacAgent
from tfagents_vtrace.agents.taac.config import TaacConfig, check_run
from tfagents_vtrace.agents.taac.export import TaacPolicyModule, restore_policy
from tfagents_vtrace.agents.taac.learner import TaacLearner
from tfagents_vtrace.agents.taac.policy import TaacPolicy, act_step
from tfagents_vtrace.agents.taac.trajectories import Trajectory

SPEC = AgentSpec(
    "taac",
    TaacConfig,
    TaacAgent,
    restore_policy=restore_policy,
    check_run=check_run,
    actor_critic_network=False,  # its own networks (networks.py): no torso of one's own
)

__all__ = [
    "SPEC",
    "TaacConfig",
    "TaacLearner",
    "TaacPolicy",
    "TaacPolicyModule",
    "TaacAgent",
    "Trajectory",
    "act_step",
    "restore_policy",
]
