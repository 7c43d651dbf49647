"""An agent as one typed description the runtime and the commands ask for its parts (as Acme's
``Builder``), instead of a module probed with ``hasattr``.

Each agent package exports ``SPEC``; the registry (:func:`tfagents_vtrace.agents.get_agent`)
returns it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tfagents_vtrace.agents.spaces import SUPPORTED_SPACES, AgentSpaces


def restore_actor_critic_policy(logdir: str):
    """The exported policy of an actor-critic run directory (IMPALA, A2C, A3C, ACER): the
    :class:`~tfagents_vtrace.export.actor_critic.ActorCriticPolicy` of its network, rebuilt
    from ``config.json`` with the weights of the latest checkpoint."""
    from tfagents_vtrace.export.actor_critic import as_policy_module
    from tfagents_vtrace.runtime.rundir.checkpointing import restore_network

    return as_policy_module(restore_network(logdir))


@dataclasses.dataclass(frozen=True)
class AgentSpec:
    """What an agent is made of.

    Attributes:
      name: the registry's name (``--agent``).
      Config: the frozen config dataclass of its hyperparameters (validated on creation).
      run_agent: ``run_agent(run, config, network_config, *, strategy, env_factory)`` ->
        the driver's :class:`~tfagents_vtrace.runtime.run_agent.RunAgent`. An agent whose
        learning is one compiled update on unrolls from actors (IMPALA, A2C) gives
        ``actor_learner(Learner)`` (:func:`tfagents_vtrace.runtime.actor_learner.
        actor_learner`); one with its own process shape (A3C's workers, ACER's replay, TAAC's
        per-step updates) its own ``RunAgent`` class.
      network_config_for: ``(network_config, config, spaces) -> NetworkConfig`` (``spaces``:
        the environment's :class:`~tfagents_vtrace.envs.EnvSpaces`), the network
        the agent needs (e.g. ACER's Q head); None keeps the given one.
      restore_policy: ``(logdir) -> PolicyModule``: the policy a run directory exports
        (:mod:`tfagents_vtrace.export.policy_module`; ``tfv-export`` writes and checks it in
        every format); the actor-critic network's by default, TAAC's own module for TAAC.
      check_run: ``(config, run_config) -> None``: raises ValueError naming a setting when
        the agent's config cannot run with the run's (e.g. a batch that does not split into
        IMPALA's minibatches); None accepts every combination.
      activation: what ``NetworkConfig.activation="auto"`` means for this agent's networks.
      spaces: the observation and action spaces it takes (what the space check reads); the
        built-in agents' default to their row of ``spaces.SUPPORTED_SPACES``, an agent of
        one's own declares them.
      actor_critic_network: its policy is the shared ``ActorCriticNetwork`` of the
        ``NetworkConfig`` (IMPALA, A2C, A3C, ACER); False for an agent that builds its own
        networks (TAAC), which then refuses a torso or core of one's own.
    """

    name: str
    Config: type
    run_agent: Callable
    network_config_for: Callable | None = None
    restore_policy: Callable = restore_actor_critic_policy
    check_run: Callable | None = None
    activation: str = "tanh"
    spaces: AgentSpaces | None = None
    actor_critic_network: bool = True

    def __post_init__(self) -> None:
        if not callable(self.run_agent):
            raise ValueError(
                f"{self.name}: run_agent: expected a callable returning the run's RunAgent "
                f"(e.g. actor_learner(Learner)), received {self.run_agent!r}"
            )
        if self.spaces is None:
            if self.name not in SUPPORTED_SPACES:
                raise ValueError(
                    f"{self.name}: spaces: declare the spaces the agent takes "
                    "(spaces=AgentSpaces(observations=..., actions=...))"
                )
            object.__setattr__(self, "spaces", SUPPORTED_SPACES[self.name])

    def network_config(self, network_config, config, env_id: str, env_kwargs: dict | None = None):
        """The network config a run of this agent on ``env_id`` made with ``env_kwargs`` uses:
        "auto" activation resolved, and an "auto" torso resolved for the environment's
        observation space (:func:`~tfagents_vtrace.networks.multi_input.auto_torso`), so
        ``config.json`` records what is built.

        Raises:
          ValueError: ``torso: ...`` / ``core: ...`` for a layer of one's own given to an agent
            that builds its own networks (TAAC).
        """
        if network_config.activation == "auto":
            network_config = dataclasses.replace(network_config, activation=self.activation)
        if not self.actor_critic_network:
            for name in ("torso", "core"):
                value = getattr(network_config, name)
                if isinstance(value, str) and ":" in value:
                    raise ValueError(
                        f"{name}: agent {self.name!r} builds its own networks and does not take "
                        f"a {name} of your own ({value!r}); use impala, a2c, a3c or acer"
                    )
            if network_config.normalize_observations:
                raise ValueError(
                    f"normalize_observations: not available for {self.name} (it builds its own "
                    "networks; impala, a2c, a3c and acer keep the statistics in theirs)"
                )
        if self.network_config_for is None and network_config.torso != "auto":
            return network_config
        from tfagents_vtrace.envs import env_spaces

        spaces = env_spaces(env_id, env_kwargs)
        if network_config.torso == "auto":
            from tfagents_vtrace.networks.multi_input import auto_torso

            torso, _ = auto_torso(spaces.observation)
            network_config = dataclasses.replace(network_config, torso=torso)
        if self.network_config_for is None:
            return network_config
        return self.network_config_for(network_config, config, spaces)
