"""Games of many agents (PettingZoo's parallel API) as vector environments of one policy.

A PettingZoo ``ParallelEnv`` (https://pettingzoo.farama.org/api/parallel/) steps all its live
agents at once: ``step({agent: action})`` returns ``(observations, rewards, terminations,
truncations, infos)``, each a dict keyed by the agents that took part, and ``env.agents``
lists the agents still in the game. :class:`ParallelVectorEnv` lays ``G`` such games side by
side as one gymnasium ``VectorEnv`` whose columns are the ``(game, agent)`` slots, game-major
(column ``g * N + i`` is agent ``i`` of game ``g``, ``N`` agents a game): the actors' ``[T, B]``
batch then holds every agent of every game, and one policy acts for all of them.

Agents that are not in the game (an agent that left before the others, one that has not
arrived yet) have no turn: their column's action is dropped and the vector reports the column
in ``infos["tfv_inactive"]`` (bool ``[B]``), which means *the column's next step reaches no game*.
The actors mask such steps out of the loss exactly as they mask the reset steps of NEXT_STEP
autoreset (``reset_t``, :mod:`tfagents_vtrace.agents.loss_inputs`), and evaluations count them
in no episode; their observation is zeros and their reward 0, so no stale data is fed. Each
agent's own episode ends with its ``terminated`` / ``truncated`` step, with its return; a
column that comes back (the next game, an agent that arrives) starts a new episode.

Autoreset is gymnasium's NEXT_STEP (:mod:`tfagents_vtrace.envs.factory`): when the last agent
of game ``g`` is done, the next ``step`` resets that game, ignores its columns' actions and
returns its first observations with reward 0.

An agent's observation can carry its index as a one-hot (``agent_ids=True``): appended to a
flat ``Box`` observation, or an ``agent_id`` entry of a ``Dict`` one, so that agents sharing
one policy can still act differently.

:func:`register_game` registers a game maker under a gymnasium id: its ``vector_entry_point``
builds a :class:`ParallelVectorEnv` of ``ceil(num_envs / N)`` games (training checks that
``num_envs`` is a multiple of ``N``: :func:`check_columns`), and its ``entry_point`` a
:class:`GameSpaces`, which holds one agent's spaces for whoever reads an environment's spaces
and refuses to be stepped. The agents of one game must share their spaces (one policy acts for
all of them).

PettingZoo is imported only when one of its games is used (the ``pettingzoo`` extra).
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces as gspaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tfagents_vtrace.envs.failures import ActingError

INACTIVE = "tfv_inactive"
"""The ``infos`` key of the columns whose next step reaches no game (bool ``[B]``)."""
AGENT_ID_KEY = "agent_id"
"""The ``Dict`` observation entry of an agent's one-hot index (``agent_ids=True``)."""


def pettingzoo_installed() -> bool:
    """Whether PettingZoo can be imported (the ``pettingzoo`` extra)."""
    import importlib.util

    return importlib.util.find_spec("pettingzoo") is not None


def is_parallel_env(obj: Any) -> bool:
    """Whether ``obj`` is a PettingZoo ``ParallelEnv`` instance (by PettingZoo's class when it is
    installed; never imports it otherwise)."""
    try:
        from pettingzoo.utils.env import ParallelEnv
    except ImportError:
        return False
    return isinstance(obj, ParallelEnv)


def is_aec_env(obj: Any) -> bool:
    """Whether ``obj`` is a PettingZoo ``AECEnv`` instance (turn by turn)."""
    try:
        from pettingzoo.utils.env import AECEnv
    except ImportError:
        return False
    return isinstance(obj, AECEnv)


def is_game_class(obj: Any) -> bool:
    """Whether ``obj`` is a PettingZoo env class (parallel or AEC)."""
    try:
        from pettingzoo.utils.env import AECEnv, ParallelEnv
    except ImportError:
        return False
    return isinstance(obj, type) and issubclass(obj, ParallelEnv | AECEnv)


def as_parallel(game: Any, name: str = "env") -> Any:
    """``game`` as a ``ParallelEnv``: itself, or an AEC env through PettingZoo's own converter
    (``aec_to_parallel``, which takes only AEC envs whose agents can act at once).

    Raises:
      ValueError: ``"{name}: ..."`` for a turn-by-turn AEC env the converter refuses.
    """
    if is_parallel_env(game):
        return game
    from pettingzoo.utils.conversions import aec_to_parallel

    try:
        return aec_to_parallel(game)
    except AssertionError as e:  # the converter's refusal of a turn-by-turn game
        name_of = getattr(game, "metadata", {}).get("name", type(game).__name__)
        raise ValueError(
            f"{name}: {name_of} is an AEC game whose agents take turns, which PettingZoo's "
            f"aec_to_parallel cannot convert ({e}); give a ParallelEnv"
        ) from None


def agent_groups(game: Any, groups: dict[str, str] | None = None) -> dict[str, list[str]]:
    """``{group: [agents]}`` of ``game``: ``groups`` (``{agent: group}``, every agent named),
    or by default one group per distinct pair of observation and action spaces, named after
    its first agent (PettingZoo's ``possible_agents`` order).

    Raises:
      ValueError: ``"policy_for_agent: ..."`` for a mapping that misses an agent or puts two
        agents of different spaces in one group; ``"env: ..."`` for a game without agents.
    """
    agents = list(game.possible_agents)
    if not agents:
        raise ValueError("env: the game has no possible_agents")
    spaces = {a: (game.observation_space(a), game.action_space(a)) for a in agents}
    out: dict[str, list[str]] = {}
    if groups is None:
        firsts: list[str] = []
        for a in agents:
            first = next((f for f in firsts if spaces[f] == spaces[a]), None)
            if first is None:
                firsts.append(a)
                out[a] = [a]
            else:
                out[first].append(a)
        return out
    missing = [a for a in agents if a not in groups]
    if missing:
        raise ValueError(f"policy_for_agent: no group for agents {missing}")
    for a in agents:
        out.setdefault(str(groups[a]), []).append(a)
    for name, members in out.items():
        for a in members[1:]:
            if spaces[a] != spaces[members[0]]:
                (o1, a1), (o2, a2) = spaces[members[0]], spaces[a]
                raise ValueError(
                    f"policy_for_agent: agents {members[0]!r} and {a!r} of group {name!r} "
                    f"have different spaces (observations {o1} and {o2}, actions {a1} and "
                    f"{a2}); one policy acts for a group"
                )
    return out


_groups_of = agent_groups  # for the functions whose keyword (a setting) has its name


def _with_agent_id(space: gym.Space, n: int) -> gym.Space:
    """``space`` with room for a one-hot of ``n`` agents (module docstring)."""
    if isinstance(space, gspaces.Dict):
        if AGENT_ID_KEY in space.spaces:
            raise ValueError(f"agent_ids: the observation has an {AGENT_ID_KEY!r} entry already")
        return gspaces.Dict({**space.spaces, AGENT_ID_KEY: gspaces.Box(0.0, 1.0, (n,), np.float32)})
    if isinstance(space, gspaces.Box) and len(space.shape) == 1:
        low = np.concatenate([space.low.astype(np.float32), np.zeros(n, np.float32)])
        high = np.concatenate([space.high.astype(np.float32), np.ones(n, np.float32)])
        return gspaces.Box(low, high, dtype=np.float32)
    raise ValueError(f"agent_ids: takes a flat Box or a Dict observation, received {space}")


class _Group:
    """One group's agents, spaces and columns (``game * n + i``) in a :class:`GameHub`."""

    def __init__(self, agents: list[str], game: Any, num_games: int, agent_ids: bool):
        self.agents = agents
        self.raw_space = game.observation_space(agents[0])
        n = len(agents)
        self.observation_space = _with_agent_id(self.raw_space, n) if agent_ids else self.raw_space
        self.action_space = game.action_space(agents[0])
        self.num_envs = num_games * n
        self.agent_ids = agent_ids
        self.ids = np.eye(n, dtype=np.float32)

    def observe(self, per_game: list[dict]) -> Any:
        """The ``[B_g, ...]`` observation of the group's columns: each game's observation of
        each agent, zeros for an agent it does not hold."""
        flat = [self._agent_obs(obs.get(a), i)
                for obs in per_game for i, a in enumerate(self.agents)]  # fmt: skip
        if isinstance(self.observation_space, gspaces.Dict):
            return {k: np.stack([x[k] for x in flat]) for k in self.observation_space}
        return np.stack(flat)

    def _agent_obs(self, obs: Any, index: int) -> Any:
        if obs is None:
            obs = _zeros(self.raw_space)
        if not self.agent_ids:
            return _as_dtype(obs, self.raw_space)
        if isinstance(self.raw_space, gspaces.Dict):
            return {**_as_dtype(obs, self.raw_space), AGENT_ID_KEY: self.ids[index]}
        return np.concatenate([np.asarray(obs, np.float32).reshape(-1), self.ids[index]])


class GameHub:
    """``num_games`` games of ``make_game`` (or as many as ``columns`` agent slots need)
    stepped together, their agents in ``groups``
    (:func:`agent_groups`: ``{agent: group}``, or None for the default), each group with its
    own columns and spaces. :meth:`step` takes every group's actions and returns every
    group's outcome, as a NEXT_STEP vector env would for the group's columns alone."""

    def __init__(self, make_game: Callable[..., Any], num_games: int | None = None, *,
                 columns: int | None = None, groups: dict[str, str] | None = None,
                 agent_ids: bool = False, **env_kwargs: Any):  # fmt: skip
        first = as_parallel(make_game(**env_kwargs))
        if num_games is None:  # enough games for ``columns`` agent slots
            num_games = max(1, math.ceil(int(columns) / len(first.possible_agents)))
        self.games = [first] + [
            as_parallel(make_game(**env_kwargs)) for _ in range(int(num_games) - 1)
        ]
        self.num_games = len(self.games)
        self.groups = {
            name: _Group(agents, first, self.num_games, bool(agent_ids))
            for name, agents in agent_groups(first, groups).items()
        }
        self.metadata = {**getattr(first, "metadata", {})}
        self._where = {a: (name, i) for name, g in self.groups.items()
                       for i, a in enumerate(g.agents)}  # fmt: skip
        self._needs_reset = np.zeros(self.num_games, bool)

    def _absent(self, group: _Group) -> np.ndarray:
        return np.array([a not in game.agents for game in self.games for a in group.agents])

    def _outcome(self, per_game: list[dict]) -> dict:
        return {name: (g.observe(per_game), {INACTIVE: self._absent(g)})
                for name, g in self.groups.items()}  # fmt: skip

    def reset(self, seed: int | list | None = None, options: dict | None = None) -> dict:
        """``{group: (observation, info)}`` of new games (game ``k`` seeded ``seed + k``)."""
        if isinstance(seed, numbers.Integral):
            seeds = [int(seed) + k for k in range(self.num_games)]
        elif seed is None:
            seeds = [None] * self.num_games
        else:
            seeds = list(seed)[: self.num_games]
        per_game = []
        for k, (game, s) in enumerate(zip(self.games, seeds)):
            obs, _ = game.reset(seed=s, options=options)
            per_game.append(obs)
            self._needs_reset[k] = False
        return self._outcome(per_game)

    def step(self, actions: dict) -> dict:
        """``{group: (observation, reward, terminated, truncated, info)}`` after one step of
        every game with ``actions`` (``{group: [B_g, ...]}``); ``info`` holds the columns
        whose next step reaches no game (module docstring)."""
        rewards = {name: np.zeros(g.num_envs, np.float32) for name, g in self.groups.items()}
        term = {name: np.zeros(g.num_envs, bool) for name, g in self.groups.items()}
        trunc = {name: np.zeros(g.num_envs, bool) for name, g in self.groups.items()}
        per_game = []
        for k, game in enumerate(self.games):
            if self._needs_reset[k]:  # NEXT_STEP: this step resets the game
                obs, _ = game.reset()
                self._needs_reset[k] = False
                per_game.append(obs)
                continue
            live = list(game.agents)
            acts = {}
            for a in live:
                name, i = self._where[a]
                acts[a] = _column(actions[name], k * len(self.groups[name].agents) + i)
            obs, rew, terminated, truncated, _ = game.step(acts)
            for a in live:  # an agent absent before the step has no outcome in it
                name, i = self._where[a]
                col = k * len(self.groups[name].agents) + i
                rewards[name][col] = float(rew.get(a, 0.0))
                term[name][col] = bool(terminated.get(a, False))
                trunc[name][col] = bool(truncated.get(a, False)) and not term[name][col]
            if not game.agents:  # the game is over: the next step resets it
                self._needs_reset[k] = True
            per_game.append(obs)
        # Absent now: an agent that left (this step or before) or has not arrived, and every
        # agent of a game that is over (its next step resets the game).
        return {name: (obs, rewards[name], term[name], trunc[name], info)
                for name, (obs, info) in self._outcome(per_game).items()}  # fmt: skip

    def close(self) -> None:
        for game in self.games:
            try:
                game.close()
            except Exception:  # noqa: BLE001 - closing a broken game must not hide the cause
                pass


def _set_spaces(env: VectorEnv, group: _Group, hub: GameHub) -> None:
    """A vector of ``group``'s columns: its sizes, spaces and metadata."""
    env.num_envs = group.num_envs
    env.single_observation_space = group.observation_space
    env.single_action_space = group.action_space
    env.observation_space = batch_space(group.observation_space, env.num_envs)
    env.action_space = batch_space(group.action_space, env.num_envs)
    env.metadata = {**hub.metadata, **type(env).metadata}
    env.render_mode = None


class ParallelVectorEnv(VectorEnv):
    """``ceil(num_envs / N)`` games of ``make_game`` (a function returning a PettingZoo
    ``ParallelEnv``, or an AEC env ``aec_to_parallel`` converts) as one NEXT_STEP vector env
    whose columns are the games' agent slots (module docstring); its ``N`` agents share their
    spaces (one policy acts for all of them).

    Args:
      make_game: ``(**env_kwargs) -> ParallelEnv``.
      num_envs: columns wanted; the vector has ``N * ceil(num_envs / N)``.
      agent_ids: append each agent's one-hot index to its observation.
      **env_kwargs: passed to ``make_game``.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, make_game: Callable[..., Any], num_envs: int = 1, *,
                 agent_ids: bool = False, hub: GameHub | None = None,
                 **env_kwargs: Any):  # fmt: skip
        if hub is None:
            hub = GameHub(make_game, columns=num_envs, agent_ids=agent_ids, **env_kwargs)
        if len(hub.groups) > 1:
            hub.close()
            (a, ga), (b, gb) = [(g.agents[0], g) for g in hub.groups.values()][:2]
            raise ValueError(
                f"env: agents {a!r} and {b!r} have different spaces (observations "
                f"{ga.raw_space} and {gb.raw_space}, actions {ga.action_space} and "
                f"{gb.action_space}); one policy acts for every agent of a game, so they must "
                "share their spaces"
            )
        self.hub, self.games, self.num_games = hub, hub.games, hub.num_games
        ((self._name, group),) = hub.groups.items()
        self.agents = group.agents
        _set_spaces(self, group, hub)

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        return self.hub.reset(seed, options)[self._name]

    def step(self, actions: Any):
        return self.hub.step({self._name: actions})[self._name]

    def close(self, **kwargs: Any) -> None:
        self.hub.close()


class _Exchange:
    """Where the groups' threads meet for each call of a :class:`GameHub` (one barrier of
    as many parties as groups; the last to arrive makes the call for all)."""

    def __init__(self, hub: GameHub, timeout_s: float | None, seed: int | None = None):
        self.hub, self.timeout_s = hub, timeout_s
        self.calls: dict[str, tuple] = {}
        self.results: dict = {}
        self.first = hub.reset(seed)  # each group's first reset: no wait for the others
        self.error: BaseException | None = None
        self.barrier = threading.Barrier(len(hub.groups), action=self._call)

    def _call(self) -> None:
        kinds = {call[0] for call in self.calls.values()}
        try:
            if len(kinds) != 1:
                raise RuntimeError(f"the groups' calls differ: {self.calls}")
            if kinds == {"reset"}:
                seed, options = next(iter(self.calls.values()))[1:]
                self.results = self.hub.reset(seed, options)
            else:
                self.results = self.hub.step({g: call[1] for g, call in self.calls.items()})
        except BaseException as e:
            self.error = e
            raise

    def call(self, group: str, *call) -> tuple:
        """Group ``group``'s share of a call every group makes (``("reset", seed, options)``
        or ``("step", actions)``).

        Raises:
          GameHubBroken: the call failed, or another group's did (or it timed out).
        """
        self.calls[group] = call
        try:
            self.barrier.wait(self.timeout_s)
        except threading.BrokenBarrierError:
            cause = self.error
            what = f"{type(cause).__name__}: {cause}" if cause else "another group stopped"
            raise GameHubBroken(f"the game of many agents failed ({what})") from cause
        except BaseException as e:  # this thread ran the call, which raised
            raise GameHubBroken(f"the game of many agents failed ({type(e).__name__}: {e})") from e
        return self.results[group]

    def abort(self) -> None:
        self.barrier.abort()


class GameHubBroken(ActingError):
    """The games of a :class:`GameHub` failed while its groups stepped them from their own
    threads; acting cannot go on (the groups' vectors cannot be made again one by one)."""


class GroupVectorEnv(VectorEnv):
    """Group ``name``'s columns of a :class:`GameHub` whose groups act from one thread each
    (:func:`group_vectors`): a NEXT_STEP vector env whose ``reset`` and ``step`` return when
    every group has made the same call."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, exchange: _Exchange, name: str):
        self.exchange, self.name = exchange, name
        self._fresh = True
        _set_spaces(self, exchange.hub.groups[name], exchange.hub)

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        """The games as :func:`group_vectors` reset them, the first time (so that each
        group's actor can start alone); later, a reset of every game with the others'."""
        if self._fresh and seed is None and options is None:
            self._fresh = False
            return self.exchange.first[self.name]
        self._fresh = False
        return self.exchange.call(self.name, "reset", seed, options)

    def step(self, actions: Any):
        self._fresh = False
        return self.exchange.call(self.name, "step", actions)

    def close(self, **kwargs: Any) -> None:
        """Breaks the exchange (the other groups' calls raise) and closes the games."""
        self.exchange.abort()
        self.exchange.hub.close()

    def restart_error(self, error: BaseException) -> GameHubBroken:
        """What an actor raises instead of making this vector again after ``error``: the
        games are the other groups' too, so it cannot be made again alone. Breaks the
        exchange (the other groups' calls raise)."""
        self.exchange.abort()
        return GameHubBroken(f"the game of many agents failed ({type(error).__name__}: {error})")


def group_vectors(hub: GameHub, timeout_s: float | None = None,
                  seed: int | None = None) -> dict[str, GroupVectorEnv]:  # fmt: skip
    """``{group: GroupVectorEnv}`` of ``hub``, its games reset now with ``seed``, for one
    thread per group; a call waits at most ``timeout_s`` for the other groups' (None: no
    limit)."""
    exchange = _Exchange(hub, timeout_s, seed)
    return {name: GroupVectorEnv(exchange, name) for name in hub.groups}


class GameHubs:
    """The games a run's groups share: for each seed, one :class:`GameHub` of ``num_games``
    games of the registered game ``env_id``, made by the first group that asks for it (the
    actors of one index make their environments with the same seed), its groups' vectors
    (:func:`group_vectors`) handed to the others.

    Picklable (a Ray host builds its own games): what it made stays in the process that made
    it. ``hub_kwargs`` are :class:`GameHub`'s ``agent_ids`` / ``groups``, ``game_kwargs``
    the game's own."""

    def __init__(self, env_id: str, num_games: int, timeout_s: float | None = None,
                 hub_kwargs: dict | None = None, game_kwargs: dict | None = None):  # fmt: skip
        self.env_id, self.num_games, self.timeout_s = env_id, int(num_games), timeout_s
        self.hub_kwargs, self.game_kwargs = dict(hub_kwargs or {}), dict(game_kwargs or {})
        self._made()

    def _made(self) -> None:
        self._lock = threading.Lock()
        self._views: dict[int, dict[str, GroupVectorEnv]] = {}

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_views")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._made()

    def vector(self, group: str, seed: int) -> GroupVectorEnv:
        """Group ``group``'s vector of the games of ``seed`` (made now if they are not)."""
        with self._lock:
            views = self._views.get(seed)
            if views is None:
                hub = GameHub(game_maker(self.env_id), self.num_games, **self.hub_kwargs,
                              **self.game_kwargs)  # fmt: skip
                # seeded once: later resets draw from the games' RNGs
                views = group_vectors(hub, self.timeout_s, seed)
                self._views[seed] = views
            return views[group]

    def abort(self) -> None:
        """Breaks every exchange: a group waiting for the others' call raises
        :class:`GameHubBroken`."""
        with self._lock:
            for views in self._views.values():
                next(iter(views.values())).exchange.abort()

    def clear(self) -> None:
        with self._lock:
            self._views.clear()


class JointVectorEnv(VectorEnv):
    """Every group's columns of a :class:`GameHub` as one NEXT_STEP vector env stepped by one
    thread (an evaluation): observations and actions are ``{group: [B_g, ...]}``; rewards,
    ``terminated``, ``truncated`` and ``infos["tfv_inactive"]`` are the groups' columns one
    after the other, in the hub's group order."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, hub: GameHub):
        self.hub = hub
        self.num_envs = sum(g.num_envs for g in hub.groups.values())
        self.single_observation_space = gspaces.Dict(
            {name: g.observation_space for name, g in hub.groups.items()}
        )
        self.single_action_space = gspaces.Dict(
            {name: g.action_space for name, g in hub.groups.items()}
        )
        self.observation_space = gspaces.Dict(
            {name: batch_space(g.observation_space, g.num_envs) for name, g in hub.groups.items()}
        )
        self.action_space = gspaces.Dict(
            {name: batch_space(g.action_space, g.num_envs) for name, g in hub.groups.items()}
        )
        self.metadata = {**hub.metadata, **type(self).metadata}
        self.render_mode = None

    def reset(self, *, seed: int | list | None = None, options: dict | None = None):
        out = self.hub.reset(seed, options)
        obs = {name: o for name, (o, _) in out.items()}
        return obs, {INACTIVE: np.concatenate([info[INACTIVE] for _, info in out.values()])}

    def step(self, actions: dict):
        out = self.hub.step(actions)
        obs = {name: o[0] for name, o in out.items()}
        joined = [np.concatenate([o[k] for o in out.values()]) for k in (1, 2, 3)]
        inactive = np.concatenate([o[4][INACTIVE] for o in out.values()])
        return obs, *joined, {INACTIVE: inactive}

    def close(self, **kwargs: Any) -> None:
        self.hub.close()


def _column(actions: Any, col: int) -> Any:
    if isinstance(actions, dict):
        return {k: _column(v, col) for k, v in actions.items()}
    if isinstance(actions, tuple):
        return tuple(_column(v, col) for v in actions)
    x = np.asarray(actions)[col]
    return x.item() if x.ndim == 0 else x


def _zeros(space: gym.Space) -> Any:
    if isinstance(space, gspaces.Dict):
        return {k: _zeros(s) for k, s in space.spaces.items()}
    if isinstance(space, gspaces.Discrete):
        return np.asarray(space.start, space.dtype)
    return np.zeros(space.shape, space.dtype)


def _as_dtype(obs: Any, space: gym.Space) -> Any:
    if isinstance(space, gspaces.Dict):
        return {k: _as_dtype(obs[k], s) for k, s in space.spaces.items()}
    return np.asarray(obs, space.dtype)


class GameSpaces(gym.Env):
    """A registered game's spaces (what reads an environment's spaces makes): its group
    ``group``'s, or with none its first group's (:func:`agent_groups` of ``agent_groups``:
    ``{agent: group}``, or by spaces); ``groups`` holds ``{group: [agents]}``. A game is
    played only as a vector of games, so this refuses to be stepped."""

    def __init__(self, make_game: Callable[..., Any], agent_ids: bool = False,
                 agent_groups: dict | None = None, group: str | None = None,
                 **env_kwargs):  # fmt: skip
        game = as_parallel(make_game(**env_kwargs))
        try:
            self.groups = _groups_of(game, agent_groups)
            self.metadata = {**getattr(game, "metadata", {})}
            name = next(iter(self.groups)) if group is None else group
            if name not in self.groups:
                raise ValueError(f"group: expected one of {list(self.groups)}, received {group!r}")
            members = self.groups[name]
            obs_space = game.observation_space(members[0])
            self.action_space = game.action_space(members[0])
        finally:
            game.close()
        self.possible_agents = [a for agents in self.groups.values() for a in agents]
        self.group_agents = members
        self.observation_space = _with_agent_id(obs_space, len(members)) if agent_ids else obs_space

    def reset(self, *, seed=None, options=None):
        raise TypeError(_VECTOR_ONLY)

    def step(self, action):
        raise TypeError(_VECTOR_ONLY)


_VECTOR_ONLY = (
    "a game of many agents is played as a vector of games (env_mode auto): "
    "tfagents_vtrace.envs.multi_agent.ParallelVectorEnv"
)


class _VectorMaker:
    """The ``vector_entry_point`` of a registered game (picklable when ``make_game`` is): a
    :class:`ParallelVectorEnv` of a game with one group, a :class:`JointVectorEnv` of every
    group's columns (an evaluation's) with several."""

    def __init__(self, make_game: Callable[..., Any]):
        self.make_game = make_game

    def __call__(self, num_envs: int = 1, agent_ids: bool = False,
                 agent_groups: dict | None = None, group: str | None = None,
                 **kwargs: Any) -> VectorEnv:  # fmt: skip
        if group is not None:
            raise ValueError(
                "group: a group's vector steps its games with the other groups' "
                "(multi_agent.group_vectors), not alone"
            )
        hub = GameHub(self.make_game, columns=num_envs, groups=agent_groups,
                      agent_ids=agent_ids, **kwargs)  # fmt: skip
        if len(hub.groups) == 1 and agent_groups is None:
            return ParallelVectorEnv(self.make_game, hub=hub)
        return JointVectorEnv(hub)


class _SpacesMaker:
    """The ``entry_point`` of a registered game: its :class:`GameSpaces`."""

    def __init__(self, make_game: Callable[..., Any]):
        self.make_game = make_game

    def __call__(self, **kwargs: Any) -> GameSpaces:
        return GameSpaces(self.make_game, **kwargs)


def register_game(make_game: Callable[..., Any], env_id: str) -> str:
    """Registers ``make_game`` (a PettingZoo env class or a function returning a parallel or
    AEC env) under ``env_id`` (module docstring); returns ``env_id``. The same maker
    registered again keeps its registration."""
    spec = gym.registry.get(env_id)
    if spec is not None and getattr(spec.entry_point, "make_game", None) is make_game:
        return env_id
    gym.register(
        env_id,
        entry_point=_SpacesMaker(make_game),
        vector_entry_point=_VectorMaker(make_game),
        disable_env_checker=True,
        order_enforce=False,
    )
    return env_id


def game_maker(env_id: str) -> Callable[..., Any]:
    """The function or class that makes one game of a registered game ``env_id``."""
    return gym.spec(env_id).entry_point.make_game


def game_groups(env_id: str, env_kwargs: dict | None = None) -> dict[str, list[str]] | None:
    """``{group: [agents]}`` of a registered game ``env_id`` made with ``env_kwargs``; None
    for any other id."""
    if not is_game_id(env_id):
        return None
    kwargs = {k: v for k, v in dict(env_kwargs or {}).items() if k != "group"}
    env = gym.make(env_id, **kwargs)
    try:
        return dict(env.unwrapped.groups)
    finally:
        env.close()


def game_agents(env_id: str, env_kwargs: dict | None = None) -> list[str] | None:
    """The agents of one game of a registered game ``env_id`` made with ``env_kwargs``; None
    for any other id."""
    if not is_game_id(env_id):
        return None
    env = gym.make(env_id, **dict(env_kwargs or {}))
    try:
        return list(env.unwrapped.possible_agents)
    finally:
        env.close()


def is_game_id(env_id: str) -> bool:
    """Whether ``env_id`` is registered by :func:`register_game`."""
    spec = gym.registry.get(env_id)
    return spec is not None and isinstance(spec.entry_point, _SpacesMaker)


def check_game_run(env_id: str, num_envs: int, mode: str = "auto",
                   env_kwargs: dict | None = None) -> None:  # fmt: skip
    """Raises ``ValueError`` naming the setting unless a training's actors can play game
    ``env_id``: ``num_envs`` a whole number of games (one column per agent) and ``env_mode``
    "auto" (:func:`check_mode`); nothing for other ids."""
    if not is_game_id(env_id):
        return
    check_mode(env_id, mode)
    n = len(game_agents(env_id, env_kwargs))
    if num_envs % n:
        raise ValueError(
            f"num_envs: expected a multiple of {n} (one column per agent of each game of "
            f"{env_id}), received {num_envs}"
        )


def check_mode(env_id: str, mode: str) -> None:
    """Raises ``ValueError("env_mode: ...")`` for a game id and a mode other than "auto" (a
    game runs as one :class:`ParallelVectorEnv`)."""
    if mode != "auto" and is_game_id(env_id):
        raise ValueError(
            f"env_mode: a game of many agents ({env_id}) runs as one vector of its games, "
            f"mode 'auto'; received {mode!r}"
        )
