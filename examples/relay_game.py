"""A small PettingZoo game of two agents, one of which leaves early, and one policy for both.

    tfv-train --agent=impala --env=relay_game:make_relay --logdir=runs/relay

``Relay``: agents ``a`` and ``b`` share their spaces. At each step each agent in the game sees
``[x, t / length]`` with a bit ``x`` drawn for it, and earns 1 for the action ``x`` (``b``
for the action 1 whatever it sees when ``mirror``: a shared policy then needs the agents'
ids to earn everything). ``b`` arrives at step
``b_arrives`` and leaves the game (terminated) when ``b_leaves`` steps have passed; ``a``'s
end after ``length`` steps ends the game. The best return is ``length`` for ``a`` and
``b_leaves - b_arrives`` for ``b``.

``a`` sees the time, so its end is part of the game: a termination (Pardo et al., "Time
Limits in Reinforcement Learning", https://arxiv.org/abs/1712.00378). ``a_truncated=True``
reports it as a truncation instead, as a time limit the agent cannot see would be: the
learner then bootstraps from ``a``'s last observation, ``t / length = 1``, a state no value
target ever reaches, and the value's estimates there and before it grow without bound
(the policy still learns the game).
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class Relay(ParallelEnv):
    metadata = {"name": "relay_v0", "is_parallelizable": True}

    def __init__(self, length: int = 6, b_leaves: int = 3, b_arrives: int = 0,
                 mirror: bool = False, a_truncated: bool = False):  # fmt: skip
        self.length, self.b_leaves, self.b_arrives = length, b_leaves, b_arrives
        self.mirror, self.a_truncated = mirror, a_truncated
        self.possible_agents = ["a", "b"]
        self.agents = []
        self._rng = np.random.default_rng()
        self.t = 0
        self.bits = {}

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self) -> dict:
        self.bits = {a: int(self._rng.integers(2)) for a in self.agents}
        return {a: np.array([self.bits[a], self.t / self.length], np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.t = 0
        self.agents = ["a"] + (["b"] if self.b_arrives == 0 else [])
        return self._obs(), {a: {} for a in self.agents}

    def _target(self, agent: str) -> int:
        bit = self.bits[agent]
        return 1 if self.mirror and agent == "b" else bit

    def step(self, actions):
        took_part = list(self.agents)
        rewards = {a: float(int(actions[a]) == self._target(a)) for a in took_part}
        self.t += 1
        a_ends = "a" in took_part and self.t >= self.length
        terminations = {a: a == "b" and self.t >= self.b_leaves for a in took_part}
        truncations = {a: False for a in took_part}
        if a_ends:
            (truncations if self.a_truncated else terminations)["a"] = True
        self.agents = [a for a in took_part if not (terminations[a] or truncations[a])]
        if self.agents and self.t == self.b_arrives and "b" not in took_part:
            self.agents.append("b")
        current = self._obs()
        obs = {a: current.get(a, np.array([0.0, self.t / self.length], np.float32))
               for a in {*took_part, *self.agents}}  # fmt: skip
        infos = {a: {} for a in obs}
        return obs, rewards, terminations, truncations, infos


class UnevenRelay(Relay):
    """``Relay`` whose ``b`` has other spaces: it sees ``[x1, x2, t / length]`` with two bits
    drawn for it and earns 1 for the action ``x1 + x2`` of ``Discrete(3)``. The game's agents
    differ, so a run trains one policy for each (two groups by default)."""

    metadata = {"name": "uneven_relay_v0", "is_parallelizable": True}

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (2 if agent == "a" else 3,), np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2 if agent == "a" else 3)

    def _obs(self) -> dict:
        self.bits = {a: self._rng.integers(2, size=1 if a == "a" else 2) for a in self.agents}
        return {a: np.array([*self.bits[a], self.t / self.length], np.float32)
                for a in self.agents}  # fmt: skip

    def _target(self, agent: str) -> int:
        return int(self.bits[agent].sum())

    def step(self, actions):
        obs, rewards, terminations, truncations, infos = super().step(actions)
        for a in obs:  # a departed agent's last observation has its own shape
            if obs[a].shape != self.observation_space(a).shape:
                obs[a] = np.zeros(self.observation_space(a).shape, np.float32)
        return obs, rewards, terminations, truncations, infos


def make_relay(**kwargs) -> Relay:
    """A new game (``--env=relay_game:make_relay``)."""
    return Relay(**kwargs)


def make_uneven(**kwargs) -> UnevenRelay:
    """A new game whose two agents have different spaces."""
    return UnevenRelay(**kwargs)


def make_mirror(**kwargs) -> Relay:
    """A new game in which ``b`` always earns for action 1."""
    return Relay(mirror=True, **kwargs)


def best_returns(length: int = 6, b_leaves: int = 3, b_arrives: int = 0) -> dict:
    """Each agent's best return in one game."""
    return {"a": float(length), "b": float(b_leaves - b_arrives)}
