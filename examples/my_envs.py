"""Environments of your own: plain gymnasium environments in a module of yours.

Importing this module registers ``Corridor-v0``, so it can be named on the command line as
``--env=my_envs:Corridor-v0`` (gymnasium imports ``my_envs`` because you named it).
"""

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right to the end of a corridor of ``length`` cells: +1 there, -0.01 a step, at
    most ``max_steps`` steps. Observation: position and time, both in [0, 1]."""

    def __init__(self, length: int = 6, max_steps: int = 40):
        self.length, self.max_steps = length, max_steps
        self.observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)  # 0: left, 1: right

    def _obs(self):
        return np.array([self.pos / self.length, self.t / self.max_steps], np.float32)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.pos, self.t = 0, 0
        return self._obs(), {}

    def step(self, action):
        self.pos = max(0, self.pos + (1 if int(action) == 1 else -1))
        self.t += 1
        reached = self.pos >= self.length
        reward = 1.0 if reached else -0.01
        return self._obs(), reward, reached, self.t >= self.max_steps, {}


gym.register("Corridor-v0", entry_point=Corridor)
