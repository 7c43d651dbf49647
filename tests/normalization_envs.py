"""Environments of the normalisation tests: CartPole whose observations are in the thousands."""

import gymnasium as gym
import numpy as np


class ScaledCartPole(gym.ObservationWrapper):
    """CartPole-v1 with observations ``1000 * x + 500``: the task unchanged, its inputs far
    from the unit scale a network's initialisation expects."""

    def __init__(self, render_mode=None):
        super().__init__(gym.make("CartPole-v1", render_mode=render_mode))
        high = np.full(4, 1e7, np.float32)
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def observation(self, observation):
        return (np.asarray(observation, np.float32) * 1000.0 + 500.0).astype(np.float32)


if "ScaledCartPole-v0" not in gym.registry:
    gym.register("ScaledCartPole-v0", entry_point=ScaledCartPole, max_episode_steps=500)
