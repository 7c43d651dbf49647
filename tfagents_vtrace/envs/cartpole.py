"""CartPole without velocities: a partially observed control task for recurrent agents.

``CartPoleNoVel-v1`` is gymnasium's ``CartPole-v1`` (500-step limit, reward threshold 475)
whose observation keeps only the cart position ``x`` and the pole angle ``theta``: the cart
velocity and the pole's angular velocity are removed, so a policy has to infer them from
the history (e.g. with an LSTM core). This is the "POMDP CartPole" used to test recurrent
IMPALA agents, see Espeholt et al., "IMPALA: Scalable Distributed Deep-RL with Importance
Weighted Actor-Learner Architectures", 2018, https://arxiv.org/abs/1802.01561 (LSTM agents),
and Hausknecht & Stone, "Deep Recurrent Q-Learning for Partially Observable MDPs", 2015,
https://arxiv.org/abs/1507.06527 (flickering / velocity-free observations).

Two entry points are provided: :class:`CartPoleNoVelEnv` (one environment) and
:class:`CartPoleNoVelVectorEnv` (numpy-vectorized over ``num_envs`` with gymnasium's
NEXT_STEP autoreset, as ``CartPoleVectorEnv``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.envs.classic_control.cartpole import CartPoleEnv, CartPoleVectorEnv
from gymnasium.vector.utils import batch_space

# Indices of the observed entries of CartPole's state (x, x_dot, theta, theta_dot).
OBSERVED_INDICES: tuple[int, ...] = (0, 2)


def _observed_box(full: spaces.Box) -> spaces.Box:
    """The Box of CartPole's observation restricted to :data:`OBSERVED_INDICES`."""
    idx = list(OBSERVED_INDICES)
    return spaces.Box(low=full.low[idx], high=full.high[idx], dtype=np.float32)


class CartPoleNoVelEnv(CartPoleEnv):
    """CartPole-v1 observing ``[x, theta]`` only (float32 ``[2]``)."""

    def __init__(self, render_mode: str | None = None, **kwargs: Any):
        super().__init__(render_mode=render_mode, **kwargs)
        self.observation_space = _observed_box(self.observation_space)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One CartPole step; the observation drops the two velocity entries."""
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[list(OBSERVED_INDICES)], reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset as CartPole; the observation drops the two velocity entries."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[list(OBSERVED_INDICES)], info


class CartPoleNoVelVectorEnv(CartPoleVectorEnv):
    """Vectorized CartPole observing ``[x, theta]``: observations ``[num_envs, 2]`` float32.

    Same dynamics, rewards, truncation (``max_episode_steps``, 500 by default) and NEXT_STEP
    autoreset as gymnasium's ``CartPoleVectorEnv``.
    """

    def __init__(self, num_envs: int = 1, max_episode_steps: int = 500, **kwargs: Any):
        super().__init__(num_envs=num_envs, max_episode_steps=max_episode_steps, **kwargs)
        self.single_observation_space = _observed_box(self.single_observation_space)
        self.observation_space = batch_space(self.single_observation_space, num_envs)

    def step(
        self, action: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One vectorized step; observations ``[num_envs, 2]``."""
        obs, reward, terminated, truncated, info = super().step(action)
        return obs[:, list(OBSERVED_INDICES)], reward, terminated, truncated, info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset every sub-environment; observations ``[num_envs, 2]``."""
        obs, info = super().reset(seed=seed, options=options)
        return obs[:, list(OBSERVED_INDICES)], info
