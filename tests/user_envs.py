"""Small user environments of four kinds, for checking that the default settings learn.

Each is a ``gymnasium.Env`` subclass in plain numpy with episodes of at most 50 steps, and
each has ``random_return`` / ``best_return`` helpers (a uniform random policy and a scripted
near-optimal one) so a benchmark can tell how far a trained policy got:

* :class:`Corridor`: Discrete(2) actions on a 1-D corridor, ``Box`` observations; the goal
  end is given in the observation.
* :class:`GridDict`: a 5x5 grid with ``Dict(image=Box(0, 255, [5, 5, 2], uint8),
  vector=Box([2]))`` observations and Discrete(4) moves to a goal.
* :class:`PointReacher`: a 2-D point steered by a continuous ``Box(-1, 1, [2])`` action
  toward a target; reward ``-distance`` per step.
* :class:`ContextPairs`: a contextual task with a ``MultiDiscrete([3, 3])`` action whose
  correct pair depends on the observation.

They are not registered ids: pass the class (``tv.train("impala", env=Corridor, ...)``).

Misbehaving simulators, registered on import so that a command line can name them
(``--env=tests.user_envs:FlakyCartPole-v0``); each is CartPole-v1 (500-step episodes) but:

* ``FlakyCartPole-v0``: ``step`` raises ``RuntimeError`` on a fraction of calls, each
  sub-environment independently (``TFV_FAILURE_RATE``, default 0.01);
* ``HangingCartPole-v0``: one ``step`` never returns, once the process has stepped
  ``TFV_HANG_AT`` times (all sub-environments counted together; default 2000), at most
  ``TFV_HANGS`` times per process (default 1);
* ``ResetArity-v0`` / ``StepArity-v0``: ``reset`` returns three values / ``step`` four (the
  pre-gymnasium-1.0 API);
* ``HugeReward-v0``: a reward of 1e300 (finite in float64, infinite in float32) on a fraction
  of steps (``TFV_FAILURE_RATE``, default 0.01).
"""

from __future__ import annotations

import itertools
import os
import threading

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv


class Corridor(gym.Env):
    """A corridor of ``length`` cells; start in the middle, the goal at the end the
    observation's second entry names (-1 left, +1 right). Reward +1 at the goal, -0.02 per
    step otherwise; at most 50 steps. Observation ``[position in [-1, 1], goal side]``."""

    max_steps = 50

    def __init__(self, length: int = 11):
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._pos, self._side, self._t = 0, 1, 0

    def _obs(self) -> np.ndarray:
        x = 2.0 * self._pos / (self.length - 1) - 1.0
        return np.array([x, self._side], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.length // 2
        self._side = 1 if self.np_random.random() < 0.5 else -1
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        self._pos = int(np.clip(self._pos + (1 if int(action) == 1 else -1), 0, self.length - 1))
        goal = self.length - 1 if self._side == 1 else 0
        terminated = self._pos == goal
        reward = 1.0 if terminated else -0.02
        return self._obs(), reward, terminated, self._t >= self.max_steps, {}

    def oracle(self, obs: np.ndarray) -> int:
        return 1 if obs[1] > 0 else 0


class GridDict(gym.Env):
    """A 5x5 grid: image channel 0 marks the agent, channel 1 the goal (255); ``vector`` is
    ``[steps left / 30, 1]``. Actions up/down/left/right; +1 at the goal, -0.02 per step
    otherwise; at most 30 steps."""

    size, max_steps = 5, 30
    moves = np.array([[-1, 0], [1, 0], [0, -1], [0, 1]])

    def __init__(self):
        n = self.size
        self.observation_space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, (n, n, 2), np.uint8),
                "vector": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(4)
        self._agent = np.zeros(2, int)
        self._goal = np.zeros(2, int)
        self._t = 0

    def _obs(self) -> dict:
        image = np.zeros((self.size, self.size, 2), np.uint8)
        image[self._agent[0], self._agent[1], 0] = 255
        image[self._goal[0], self._goal[1], 1] = 255
        vector = np.array([1.0 - self._t / self.max_steps, 1.0], np.float32)
        return {"image": image, "vector": vector}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        cells = self.np_random.choice(self.size * self.size, 2, replace=False)
        self._agent = np.array(divmod(int(cells[0]), self.size))
        self._goal = np.array(divmod(int(cells[1]), self.size))
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        self._agent = np.clip(self._agent + self.moves[int(action)], 0, self.size - 1)
        terminated = bool(np.all(self._agent == self._goal))
        reward = 1.0 if terminated else -0.02
        return self._obs(), reward, terminated, self._t >= self.max_steps, {}

    def oracle(self, obs: dict) -> int:
        a = np.argwhere(obs["image"][..., 0])[0]
        g = np.argwhere(obs["image"][..., 1])[0]
        d = g - a
        if d[0] != 0:
            return 1 if d[0] > 0 else 0
        return 3 if d[1] > 0 else 2


class PointReacher(gym.Env):
    """A point in ``[-1, 1]^2`` moved by ``0.1 * clip(action, -1, 1)`` per step toward a
    random target; reward ``-distance`` after the move, 50 steps (time limit only).
    Observation ``[position, target]``."""

    max_steps, speed = 50, 0.1

    def __init__(self):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._pos = np.zeros(2)
        self._target = np.zeros(2)
        self._t = 0

    def _obs(self) -> np.ndarray:
        return np.concatenate([self._pos, self._target]).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = self.np_random.uniform(-1.0, 1.0, 2)
        self._target = self.np_random.uniform(-1.0, 1.0, 2)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        self._t += 1
        a = np.clip(np.asarray(action, np.float64).reshape(2), -1.0, 1.0)
        self._pos = np.clip(self._pos + self.speed * a, -1.0, 1.0)
        reward = -float(np.linalg.norm(self._target - self._pos))
        return self._obs(), reward, False, self._t >= self.max_steps, {}

    def oracle(self, obs: np.ndarray) -> np.ndarray:
        d = (obs[2:] - obs[:2]) / self.speed
        return np.clip(d, -1.0, 1.0).astype(np.float32)


class ContextPairs(gym.Env):
    """Each step shows a context ``(i, j)`` in {0, 1, 2}^2 as two one-hots (observation
    ``[6]``); the correct action is ``((i + 1) % 3, (2 * j) % 3)``. Reward 0.5 for each
    correct component; 20 steps per episode (time limit only)."""

    max_steps = 20

    def __init__(self):
        self.observation_space = gym.spaces.Box(0.0, 1.0, (6,), np.float32)
        self.action_space = gym.spaces.MultiDiscrete([3, 3])
        self._ctx = np.zeros(2, int)
        self._t = 0

    def _draw(self) -> np.ndarray:
        self._ctx = self.np_random.integers(0, 3, 2)
        obs = np.zeros(6, np.float32)
        obs[self._ctx[0]] = 1.0
        obs[3 + self._ctx[1]] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        return self._draw(), {}

    def step(self, action):
        self._t += 1
        a = np.asarray(action).reshape(2)
        want = ((self._ctx[0] + 1) % 3, (2 * self._ctx[1]) % 3)
        reward = 0.5 * float(a[0] == want[0]) + 0.5 * float(a[1] == want[1])
        return self._draw(), reward, False, self._t >= self.max_steps, {}

    def oracle(self, obs: np.ndarray) -> np.ndarray:
        i, j = int(np.argmax(obs[:3])), int(np.argmax(obs[3:]))
        return np.array([(i + 1) % 3, (2 * j) % 3])


ENVS = {"corridor": Corridor, "grid_dict": GridDict, "point": PointReacher, "pairs": ContextPairs}


def mean_return(env_cls, policy=None, episodes: int = 200, seed: int = 0) -> float:
    """Mean undiscounted return of ``policy(env, obs) -> action`` (None: uniform random
    actions from the action space) over ``episodes`` episodes."""
    env = env_cls()
    env.action_space.seed(seed)
    total = 0.0
    for k in range(episodes):
        obs, _ = env.reset(seed=seed + k)
        done = False
        while not done:
            action = env.action_space.sample() if policy is None else policy(env, obs)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += reward
            done = terminated or truncated
    return total / episodes


def random_return(env_cls, episodes: int = 200) -> float:
    """Mean return of uniform random actions."""
    return mean_return(env_cls, None, episodes)


def best_return(env_cls, episodes: int = 200) -> float:
    """Mean return of the scripted near-optimal policy (``env.oracle``)."""
    return mean_return(env_cls, lambda env, obs: env.oracle(obs), episodes)


def _rate() -> float:
    return float(os.environ.get("TFV_FAILURE_RATE", "0.01"))


class FlakyCartPole(CartPoleEnv):
    """CartPole whose ``step`` raises on a fraction ``failure_rate`` of calls (module
    docstring); the failures are drawn from a generator of their own, so they do not follow
    the episode's seed."""

    def __init__(self, failure_rate: float | None = None, **kwargs):
        super().__init__(**kwargs)
        self.failure_rate = _rate() if failure_rate is None else float(failure_rate)
        self._failures = np.random.default_rng()

    def step(self, action):
        if self._failures.random() < self.failure_rate:
            raise RuntimeError("simulated simulator crash")
        return super().step(action)


_HANG_STEPS = itertools.count()
_HANGS = itertools.count()


class HangingCartPole(CartPoleEnv):
    """CartPole whose ``step`` never returns once the process has stepped ``TFV_HANG_AT``
    times, at most ``TFV_HANGS`` times per process (module docstring)."""

    def step(self, action):
        if next(_HANG_STEPS) >= int(os.environ.get("TFV_HANG_AT", "2000")):
            if next(_HANGS) < int(os.environ.get("TFV_HANGS", "1")):
                threading.Event().wait()  # a simulator stuck in a call that never returns
        return super().step(action)


class ResetArity(CartPoleEnv):
    """``reset`` returns ``(obs, info, extra)``."""

    def reset(self, *, seed=None, options=None):
        return (*super().reset(seed=seed, options=options), None)


class StepArity(CartPoleEnv):
    """``step`` returns ``(obs, reward, done, info)`` (gym < 0.26)."""

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated or truncated, info


class HugeReward(CartPoleEnv):
    """A reward of 1e300 on a fraction of steps (module docstring)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._draws = np.random.default_rng()

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        if self._draws.random() < _rate():
            reward = 1e300
        return obs, reward, terminated, truncated, info


for _cls in (FlakyCartPole, HangingCartPole, ResetArity, StepArity, HugeReward):
    if f"{_cls.__name__}-v0" not in gym.registry:
        gym.register(f"{_cls.__name__}-v0", entry_point=_cls, max_episode_steps=500)
