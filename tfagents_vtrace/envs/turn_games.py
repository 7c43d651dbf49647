"""A turn-by-turn game of PettingZoo (its AEC API) seen from one seat, the other seats played
by an opponent inside ``step``: a single-agent gymnasium environment.

PettingZoo's AEC games (https://pettingzoo.farama.org/api/aec/) such as Connect Four or chess
let one agent act at a time (``env.agent_selection``); ``env.last()`` gives that agent its
observation and the reward it gathered since its previous turn. :class:`TurnGame` puts the
learner in one seat (``seat``: an agent name, or ``"alternate"``: the first seat in even
episodes and the second in odd ones, so a policy learns both sides) and plays every other
seat's turn with ``opponent`` before it hands the board back. The learner's step reward is
the reward its seat gathered from its move up to its next turn (the opponent's winning move
included), and its episode ends when its seat is terminated or truncated.

Opponents are ``(observation, agent, rng) -> action`` callables, or a name: ``"random"`` (a
uniformly random action among those the observation's ``action_mask`` allows),
``"lookahead"`` for Connect Four (:func:`connect_four_lookahead`: win now if a move wins,
else block the opponent's immediate win, else random), and the self-play names ``"self"`` (a
frozen past snapshot of the policy being trained, drawn anew for each episode) and
``"oldest"`` (the first snapshot of the run). Snapshots come from the process's
:class:`SnapshotSource` (:func:`set_snapshot_source`), which a training run sets
(:mod:`tfagents_vtrace.runtime.self_play`); without one, a self-play game cannot be played.
A game's maker that takes ``opponent=`` lets a run evaluate its policy against fixed
opponents (``random`` and ``oldest``) while it trains against ``self``.

The info of the step that ends an episode holds ``outcome``: 1 for a win (the seat's final
reward above 0), -1 for a loss, 0 for a draw, and ``seat``, the seat's index.

The game's observation and action spaces are the learner's seat's (all seats must share
them); a ``Dict`` observation with an ``action_mask`` entry masks the policy
(:mod:`tfagents_vtrace.networks.action_masks`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

Opponent = Callable[[Any, str, np.random.Generator], int]
OUTCOME = "outcome"
"""The info key of a game's end: 1 win, 0 draw, -1 loss."""


def random_opponent(observation: Any, agent: str, rng: np.random.Generator) -> int:
    """A uniformly random action among those the observation's ``action_mask`` allows.

    Raises:
      ValueError: for an observation without an ``action_mask`` entry.
    """
    mask = observation.get("action_mask") if isinstance(observation, dict) else None
    if mask is None:
        raise ValueError("opponent 'random' needs an observation with an 'action_mask' entry")
    return int(rng.choice(np.flatnonzero(np.asarray(mask))))


def _connect_four_wins(board: np.ndarray, col: int) -> bool:
    """Whether dropping a piece of channel 0's player in ``col`` of ``board`` ``[6, 7, 2]``
    (channel 0: the player to move, channel 1: the other) makes four in a row."""
    mine = board[:, :, 0].astype(bool).copy()
    filled = mine | board[:, :, 1].astype(bool)
    rows = np.flatnonzero(~filled[:, col])
    if rows.size == 0:
        return False
    row = int(rows.max())  # pieces fall to the lowest empty row (row 5 is the bottom)
    mine[row, col] = True
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        count = 1
        for sign in (1, -1):
            r, c = row + sign * dr, col + sign * dc
            while 0 <= r < 6 and 0 <= c < 7 and mine[r, c]:
                count += 1
                r, c = r + sign * dr, c + sign * dc
        if count >= 4:
            return True
    return False


def connect_four_lookahead(observation: dict, agent: str, rng: np.random.Generator) -> int:
    """Connect Four's one-step lookahead player: a winning move if there is one, else a move
    that blocks the opponent's immediate win, else a random allowed move."""
    board = np.asarray(observation["observation"])
    allowed = np.flatnonzero(np.asarray(observation["action_mask"]))
    for col in allowed:
        if _connect_four_wins(board, int(col)):
            return int(col)
    swapped = board[:, :, ::-1]
    for col in allowed:
        if _connect_four_wins(swapped, int(col)):
            return int(col)
    return int(rng.choice(allowed))


OPPONENTS: dict[str, Opponent] = {"random": random_opponent, "lookahead": connect_four_lookahead}
SELF, OLDEST = "self", "oldest"
SNAPSHOT_OPPONENTS = (SELF, OLDEST)
"""The opponents drawn from the training run's snapshots (module docstring)."""


class SnapshotSource:
    """What a self-play game draws its opponents from (a training run provides one)."""

    def draw(self, rng: np.random.Generator) -> Opponent:
        """An opponent playing a snapshot drawn by the run's rule (a new one per episode)."""
        raise NotImplementedError

    def oldest(self) -> Opponent:
        """The opponent playing the run's first snapshot."""
        raise NotImplementedError


_SOURCE: list[SnapshotSource | None] = [None]


def set_snapshot_source(source: SnapshotSource | None) -> None:
    """Makes ``source`` this process's snapshots for the ``"self"`` and ``"oldest"``
    opponents (None: none)."""
    _SOURCE[0] = source


def snapshot_source() -> SnapshotSource:
    """This process's :class:`SnapshotSource`.

    Raises:
      ValueError: ``"opponent: ..."`` when no training run provides one.
    """
    if _SOURCE[0] is None:
        raise ValueError(
            "opponent: 'self' and 'oldest' play snapshots of a policy being trained; they "
            "exist only inside a training run (give a fixed opponent such as 'random' here)"
        )
    return _SOURCE[0]


def has_snapshot_source() -> bool:
    """Whether a training run provides this process's snapshots (:func:`snapshot_source`)."""
    return _SOURCE[0] is not None


_SELF_PLAY: dict[tuple, tuple] = {}  # (env_id, kwargs) -> (entry point, is_self_play's answer)


def is_self_play(env_id: str, env_kwargs: dict | None = None) -> bool:
    """Whether ``env_id`` is a turn-by-turn game played against ``opponent="self"``: one
    environment is made to see, once per id, entry point and kwargs, for an id whose entry
    point is a class or function (what ``env=maker`` and ``--env=module:maker`` register);
    an id registered by a path string (gymnasium's, ALE's, the project's) is none."""
    from tfagents_vtrace.envs import make_env

    spec = gym.registry.get(env_id)
    if spec is None or isinstance(spec.entry_point, str) or spec.entry_point is None:
        return False
    key = (env_id, repr(sorted((env_kwargs or {}).items())))
    seen = _SELF_PLAY.get(key)
    if seen is not None and seen[0] is spec.entry_point:  # the same registration
        return seen[1]
    env = make_env(env_id, **dict(env_kwargs or {}))
    try:
        answer = bool(getattr(env.unwrapped, "self_play", False))
    finally:
        env.close()
    _SELF_PLAY[key] = (spec.entry_point, answer)
    return answer


def opponent_named(opponent: str | Opponent) -> Opponent:
    """``opponent`` itself, or the one :data:`OPPONENTS` names.

    Raises:
      ValueError: ``"opponent: ..."`` for an unknown name.
    """
    if callable(opponent):
        return opponent
    if opponent not in OPPONENTS:
        names = sorted([*OPPONENTS, *SNAPSHOT_OPPONENTS])
        raise ValueError(f"opponent: expected one of {names} or a callable, "
                         f"received {opponent!r}")  # fmt: skip
    return OPPONENTS[opponent]


def opponent_names(setting: str, value, snapshots: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The opponents a setting named ``setting`` gives, in order, as given: ``value`` a
    comma-separated str, or a list or tuple of names (each stripped; blank pieces of a str
    skipped), each one of :data:`OPPONENTS` or of ``snapshots`` (some of
    :data:`SNAPSHOT_OPPONENTS`), and at least one.

    Raises:
      ValueError: ``"SETTING: ..."`` for a value that is neither a str nor a list or tuple of
        str, an unknown name, or none.
    """
    if isinstance(value, str):
        names = tuple(n.strip() for n in value.split(",") if n.strip())
    elif isinstance(value, list | tuple) and all(isinstance(n, str) for n in value):
        names = tuple(n.strip() for n in value)
    else:
        raise ValueError(
            f"{setting}: expected a str of names separated by commas or a list or tuple of "
            f"names, received {value!r}"
        )
    known = sorted([*OPPONENTS, *snapshots])
    if not names or any(n not in known for n in names):
        raise ValueError(
            f"{setting}: expected names from {known} separated by commas, received {value!r}"
        )
    return names


class TurnGame(gym.Env):
    """One seat of the AEC game ``make_game(**game_kwargs)`` (module docstring).

    Args:
      make_game: ``(**game_kwargs) -> AECEnv``.
      opponent: who plays the other seats: ``"random"``, ``"lookahead"``, ``"self"``,
        ``"oldest"`` or a callable.
      seat: the learner's agent name, or ``"alternate"``.
      **game_kwargs: passed to ``make_game``.
    """

    def __init__(self, make_game: Callable[..., Any], opponent: str | Opponent = "random",
                 seat: str = "alternate", **game_kwargs: Any):  # fmt: skip
        self.game = make_game(**game_kwargs)
        self.agents = list(self.game.possible_agents)
        if seat != "alternate" and seat not in self.agents:
            raise ValueError(f"seat: expected 'alternate' or one of {self.agents}, received "
                             f"{seat!r}")  # fmt: skip
        first = self.agents[0]
        for agent in self.agents[1:]:
            if (self.game.observation_space(agent) != self.game.observation_space(first)
                    or self.game.action_space(agent) != self.game.action_space(first)):  # fmt: skip
                raise ValueError(
                    f"env: the seats {first!r} and {agent!r} of the game have different "
                    "spaces; one policy plays every seat, so they must share them"
                )
        self.observation_space = self.game.observation_space(first)
        self.action_space = self.game.action_space(first)
        self.metadata = dict(getattr(self.game, "metadata", {}))
        self.opponent_name = opponent if isinstance(opponent, str) else None
        self.self_play = opponent == SELF
        self.opponent = None if opponent in SNAPSHOT_OPPONENTS else opponent_named(opponent)
        self.seat_choice = seat
        self.seat = first if seat == "alternate" else seat
        self._episodes = 0
        self._rng = np.random.default_rng()

    def _advance(self) -> tuple[Any, float, bool, bool]:
        """Plays the other seats until the learner's turn or its end; returns its
        ``(observation, reward gathered, terminated, truncated)``."""
        game = self.game
        reward = 0.0
        while game.agents:
            agent = game.agent_selection
            obs, gathered, term, trunc, _ = game.last()
            if agent == self.seat:  # what the seat gathered since its move, its win included
                reward += float(gathered)
                if term or trunc:  # the seat's end: PettingZoo wants a None action for it
                    game.step(None)
                    return obs, reward, bool(term), bool(trunc and not term)
                return obs, reward, False, False
            game.step(None if (term or trunc) else self.opponent(obs, agent, self._rng))
        return game.observe(self.seat), reward, True, False

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        if self.seat_choice == "alternate":
            self.seat = self.agents[self._episodes % len(self.agents)]
        self._episodes += 1
        if self.opponent_name == SELF:  # a snapshot drawn for each episode
            self.opponent = snapshot_source().draw(self._rng)
        elif self.opponent_name == OLDEST:
            self.opponent = snapshot_source().oldest()
        self.game.reset(seed=None if seed is None else int(seed), options=options)
        obs, _, _, _ = self._advance()
        return obs, {"seat": self.agents.index(self.seat)}

    def step(self, action):
        game = self.game
        if game.agent_selection != self.seat:
            raise RuntimeError("step: the episode has ended; reset the environment")
        game.step(int(np.asarray(action)))
        obs, reward, terminated, truncated = self._advance()
        info = {"seat": self.agents.index(self.seat)}
        if terminated or truncated:
            info[OUTCOME] = int(np.sign(reward))
        return obs, reward, terminated, truncated, info

    def close(self) -> None:
        self.game.close()
