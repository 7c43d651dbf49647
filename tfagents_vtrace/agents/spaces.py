"""Which agent takes which gymnasium spaces, and the one-line refusal of the others.

:data:`SUPPORTED_SPACES` is the table (space class names per agent):

==============  ==================================  ========================================
agent           observations                        actions
==============  ==================================  ========================================
impala, a2c,    Box (float, uint8 images),          Discrete, Box (rank 1), MultiDiscrete
a3c             Discrete, Dict / Tuple of those     (rank 1, start 0), MultiBinary (rank 1)
acer            Box, Discrete                       Discrete, Box (rank 1)
taac            Box                                 Box (rank 1)
==============  ==================================  ========================================

impala, a2c and a3c take action masks (``AgentSpaces.action_masks``): a Dict observation's
``action_mask`` entry (a ``MultiBinary`` or 0 / 1 ``Box``) for Discrete or MultiDiscrete
actions (:mod:`tfagents_vtrace.networks.action_masks`).

:func:`check_spaces` raises ``ValueError`` with one line naming the agent and the space
(``env: taac does not take Discrete actions (it takes Box actions)``), before any network
is built.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np

from tfagents_vtrace.networks.action_masks import check_mask_spaces, has_mask, without_mask

__all__ = ["SUPPORTED_SPACES", "AgentSpaces", "check_spaces"]


@dataclasses.dataclass(frozen=True)
class AgentSpaces:
    """The gymnasium space classes (by name) an agent takes.

    ``observations`` may hold "Dict" / "Tuple": their sub-spaces are then any of the other
    observation names (nested Dict / Tuple included). ``rank1_actions``: action space names
    whose shape must have rank 1 (the actor-critic network's vector actions).
    ``action_masks``: a Dict observation's ``action_mask`` entry masks the policy
    (:mod:`tfagents_vtrace.networks.action_masks`; the actor-critic network does it).
    ``games``: trains games of many agents (:mod:`tfagents_vtrace.envs.multi_agent`), whose
    absent agents' steps are masked like reset steps. ``groups_and_self_play``: also a game
    of several groups, a learner each (:mod:`tfagents_vtrace.runtime.groups`), and self-play
    (:mod:`tfagents_vtrace.runtime.self_play`): its run agent is the actor-learner.
    """

    observations: tuple[str, ...]
    actions: tuple[str, ...]
    rank1_actions: tuple[str, ...] = ("Box", "MultiDiscrete", "MultiBinary")
    action_masks: bool = False
    games: bool = False
    groups_and_self_play: bool = False


_ACTOR_CRITIC = AgentSpaces(
    observations=("Box", "Discrete", "Dict", "Tuple"),
    actions=("Discrete", "Box", "MultiDiscrete", "MultiBinary"),
    action_masks=True,
    games=True,
)

_ACTOR_LEARNER = dataclasses.replace(_ACTOR_CRITIC, groups_and_self_play=True)

SUPPORTED_SPACES: dict[str, AgentSpaces] = {
    "impala": _ACTOR_LEARNER,
    "a2c": _ACTOR_LEARNER,
    "a3c": _ACTOR_CRITIC,
    "acer": AgentSpaces(observations=("Box", "Discrete"), actions=("Discrete", "Box")),
    "taac": AgentSpaces(observations=("Box",), actions=("Box",)),
}

_NESTED = ("Dict", "Tuple")


def _name(space) -> str:
    return type(space).__name__


def _or(names) -> str:
    names = list(names)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _check_observation(agent: str, table: AgentSpaces, space, inside: str | None) -> None:
    """Refuses ``space`` (a sub-space of a ``inside`` Dict / Tuple when given)."""
    name = _name(space)
    if name not in table.observations:
        if inside is None:
            raise ValueError(
                f"env: {agent} does not take {name} observations "
                f"(it takes {_or(table.observations)} observations)"
            )
        raise ValueError(
            f"env: {agent} does not take a {inside} observation holding {name} "
            f"(its Dict / Tuple observations hold {_or(table.observations)} spaces)"
        )
    if isinstance(space, gym.spaces.Dict):
        for sub in space.spaces.values():
            _check_observation(agent, table, sub, "Dict")
    elif isinstance(space, gym.spaces.Tuple):
        for sub in space.spaces:
            _check_observation(agent, table, sub, "Tuple")


def _check_action(agent: str, table: AgentSpaces, space) -> None:
    name = _name(space)
    if name not in table.actions:
        raise ValueError(
            f"env: {agent} does not take {name} actions (it takes {_or(table.actions)} actions)"
        )
    shape = tuple(space.shape or ())
    if name in table.rank1_actions and len(shape) != 1:
        raise ValueError(
            f"env: {agent} does not take {name} actions of shape {shape} (it takes "
            f"rank-1 {name} actions)"
        )
    if isinstance(space, gym.spaces.MultiDiscrete) and np.any(np.asarray(space.start) != 0):
        raise ValueError(
            f"env: {agent} does not take MultiDiscrete actions with start "
            f"{np.asarray(space.start).tolist()} (it takes start 0)"
        )


def check_spaces(agent_name: str, observation_space, action_space) -> None:
    """Raises ``ValueError`` (one line: the agent and the space) unless ``agent_name``
    takes ``observation_space`` and ``action_space`` (the single env's, unbatched spaces);
    the spaces an agent takes are its spec's (``AgentSpec.spaces``), so an agent registered
    from outside the package is checked against what it declares.

    Raises:
      ValueError: ``agent: ...`` for an agent that is not registered; ``env: ...`` for a
        space it does not take.
    """
    from tfagents_vtrace.agents import get_agent

    table = get_agent(agent_name).spaces
    if has_mask(observation_space):
        try:
            check_mask_spaces(observation_space, action_space)
        except ValueError as error:
            raise ValueError(f"env: {error}") from None
        if not table.action_masks:
            takers = [name for name, t in SUPPORTED_SPACES.items() if t.action_masks]
            raise ValueError(
                f"env: {agent_name} does not take action masks (the observation's "
                f"'action_mask' entry; {', '.join(takers[:-1])} and {takers[-1]} do)"
            )
        observation_space = without_mask(observation_space)  # its leaf is checked above
    _check_observation(agent_name, table, observation_space, None)
    _check_action(agent_name, table, action_space)


def check_game(agent_name: str, env_id: str) -> None:
    """Raises ``ValueError("env: ...")`` (one line) when ``env_id`` is a game of many agents
    (:mod:`tfagents_vtrace.envs.multi_agent`) and ``agent_name`` does not train games."""
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.envs.multi_agent import is_game_id

    if not is_game_id(env_id) or get_agent(agent_name).spaces.games:
        return
    takers = [name for name, t in SUPPORTED_SPACES.items() if t.games]
    raise ValueError(
        f"env: {agent_name} does not train games of many agents ({env_id}; "
        f"{', '.join(takers[:-1])} and {takers[-1]} do)"
    )


def check_game_run(agent_name: str, run) -> None:
    """Raises ``ValueError("env: ...")`` (one line) when ``run`` trains a game of several
    groups or self-play and ``agent_name`` does not (``AgentSpaces.groups_and_self_play``)."""
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.runtime.groups import is_group_run
    from tfagents_vtrace.runtime.self_play import is_self_play

    if get_agent(agent_name).spaces.groups_and_self_play:
        return
    what = None
    if is_group_run(run):
        what = "a game of several groups (a learner each)"
    elif is_self_play(run.env_id, run.env_kwargs):
        what = "self-play"
    if what is not None:
        takers = [name for name, t in SUPPORTED_SPACES.items() if t.groups_and_self_play]
        raise ValueError(f"env: {agent_name} does not train {what}; {' and '.join(takers)} do")
