"""Settings of one environment family (Atari, the bandits), the environment layer's own.

:class:`EnvFamilyConfig` holds the settings that only some environment ids take; each is a
``tfv-train`` flag (and ``tv.train`` setting) of the same name, and
:meth:`EnvFamilyConfig.env_kwargs` turns them into the constructor arguments of an id's
environments (``RunConfig.env_kwargs``, what the actors, the evaluator and the network
builder pass to :func:`~tfagents_vtrace.envs.factory.make_env` /
:func:`~tfagents_vtrace.envs.factory.make_vector_env`). A setting given for an id that does
not take it is an error naming it, not a setting that silently does nothing.
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.utils.validation import check_int, check_number


@dataclasses.dataclass(frozen=True)
class EnvFamilyConfig:
    """Settings of the Atari and bandit environments; None keeps the environment's own."""

    num_trials: int | None = None
    """Bandit environments only: pulls per episode (one bandit problem); None keeps the
    environment's 100 (Wang et al. 2016)."""
    screen_size: int | None = None
    """Atari (ALE/*) only: side of the square greyscale frames; None keeps 84 (42 is the
    A3C meta-RL fork's, for ``--torso=universe_cnn``)."""
    repeat_action_probability: float | None = None
    """Atari (ALE/*) only: sticky actions, the probability in [0, 1] that ALE repeats the
    previous action on each frame; None keeps the id's (0.25 for v5, as Machado et al. 2018
    recommend; 0 is the deterministic protocol of ``PongNoFrameskip-v4``-style results)."""

    policy_for_agent: str | None = None
    """Games of many agents only: ``"package.module:function"``, the function from an agent's
    id to the name of its group (each group trains its own policy; from Python, the function
    itself). None: agents of the same spaces form one group, named after its first agent."""
    agent_ids: bool = False
    """Games of many agents (PettingZoo, :mod:`tfagents_vtrace.envs.multi_agent`) only: each
    agent's observation carries its one-hot index, so that agents sharing one policy can act
    differently."""

    def __post_init__(self) -> None:
        for name in ("num_trials", "screen_size"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        p = self.repeat_action_probability
        if p is not None:
            check_number("repeat_action_probability", p, 0.0, 1.0, False, False)
            object.__setattr__(self, "repeat_action_probability", float(p))

    def env_kwargs(self, env_id: str) -> dict:
        """The constructor arguments of ``env_id``'s environments: the settings that are not
        None.

        Raises:
          ValueError: naming the setting, when ``env_id`` does not take it.
        """
        from tfagents_vtrace.envs import BANDIT_IDS
        from tfagents_vtrace.envs.factory import _family
        from tfagents_vtrace.envs.multi_agent import is_game_id

        atari = (_family(env_id) == "atari", "Atari ids (ALE/*)")
        games = (is_game_id(env_id), "games of many agents (PettingZoo)")
        bandits = (env_id in BANDIT_IDS, f"the bandit ids {list(BANDIT_IDS)}")
        takes = {
            "num_trials": bandits,
            "screen_size": atari,
            "repeat_action_probability": atari,
            "agent_ids": games,
        }
        takes["policy_for_agent"] = games
        kwargs = {}
        for name, (applies, which) in takes.items():
            value = getattr(self, name)
            if value is None or value is False:
                continue
            if not applies:
                raise ValueError(f"{name}: only {which} take it; env_id is {env_id!r}")
            kwargs[name] = value
        if "policy_for_agent" in kwargs:  # the groups, as data (config.json imports nothing)
            kwargs["agent_groups"] = groups_of(env_id, kwargs.pop("policy_for_agent"))
        return kwargs

    @classmethod
    def from_env_kwargs(cls, env_kwargs: dict, env_id: str) -> dict:
        """``env_kwargs`` (e.g. read from a run's ``config.json``) checked as settings of
        ``env_id``: ``cls(**env_kwargs).env_kwargs(env_id)``.

        Raises:
          ValueError: naming the argument, when it is no setting of this class, out of range
            or not taken by ``env_id``.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        for name in env_kwargs:
            if name not in names:
                raise ValueError(f"{name}: not an environment setting ({sorted(names)})")
        return cls(**env_kwargs).env_kwargs(env_id)


def groups_of(env_id: str, policy_for_agent) -> dict[str, str]:
    """``{agent: group}`` of game ``env_id`` by ``policy_for_agent`` (a function, or the
    ``"package.module:function"`` the user named).

    Raises:
      ValueError: ``"policy_for_agent: ..."`` for a path that does not import, or a function
        that raises or returns no name.
    """
    from tfagents_vtrace.envs.multi_agent import game_agents
    from tfagents_vtrace.utils.user_code import object_from_path

    fn = policy_for_agent
    if isinstance(fn, str):
        fn = object_from_path(fn, "policy_for_agent")
    if not callable(fn):
        raise ValueError(f"policy_for_agent: expected a function, received {fn!r}")
    groups = {}
    for agent in game_agents(env_id):
        try:
            group = fn(agent)
        except Exception as e:  # noqa: BLE001 - the user's function: one line naming it
            raise ValueError(
                f"policy_for_agent: raised {type(e).__name__}: {e} for {agent!r}"
            ) from None
        if not isinstance(group, str) or not group:
            raise ValueError(
                f"policy_for_agent: expected a group name (str) for {agent!r}, received {group!r}"
            )
        groups[agent] = group
    return groups
