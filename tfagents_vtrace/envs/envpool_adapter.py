"""A gymnasium ``VectorEnv`` over envpool's C++ thread pool (the ``envpool`` extra).

Weng et al., "EnvPool: A Highly Parallel Reinforcement Learning Environment Execution Engine",
2022, https://arxiv.org/abs/2206.10558. envpool's gymnasium interface already autoresets in
NEXT_STEP fashion (the step after an episode's end ignores the action and returns the first
observation of a new episode with reward 0); this adapter gives it the ``VectorEnv`` attributes
the runtime expects, maps ``ALE/<Game>-v5`` to envpool's ``<Game>-v5`` with the preprocessing
of :mod:`tfagents_vtrace.envs.atari` (channels last, unclipped rewards, no life-loss terminal)
and reseeds by rebuilding the pool when ``reset(seed=...)`` is given a seed.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from tfagents_vtrace.envs import atari

_ATARI_KWARGS = {
    "img_height": atari.SCREEN_SIZE,
    "img_width": atari.SCREEN_SIZE,
    "stack_num": atari.FRAME_STACK,
    "frame_skip": atari.FRAME_SKIP,
    "noop_max": atari.NOOP_MAX,
    "episodic_life": False,
    "reward_clip": False,
    "use_fire_reset": False,
    "repeat_action_probability": 0.25,
}


def _to_gym_space(space: Any) -> gym.Space:
    """envpool's spaces are gymnasium spaces already; returns them unchanged (or as Box)."""
    if isinstance(space, gym.Space):
        return space
    return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)


class EnvpoolVectorEnv(VectorEnv):
    """``num_envs`` envpool environments as a NEXT_STEP ``gymnasium.vector.VectorEnv``."""

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, env_id: str, num_envs: int, seed: int, **env_kwargs: Any):
        import envpool

        self.is_atari = env_id.startswith("ALE/")
        self.task_id = env_id.removeprefix("ALE/")
        if self.task_id not in envpool.list_all_envs():
            raise ValueError(
                f"env_id: {env_id!r} is not an envpool task; use mode='auto', 'sync' or 'async'"
            )
        self.num_envs = num_envs
        self._kwargs = {**(_ATARI_KWARGS if self.is_atari else {}), **env_kwargs}
        self._pool = self._make(seed)
        obs_space = _to_gym_space(self._pool.observation_space)
        if self.is_atari:
            s, h, w = obs_space.shape
            obs_space = spaces.Box(0, 255, shape=(h, w, s), dtype=np.uint8)
        self.single_observation_space = obs_space
        self.single_action_space = _to_gym_space(self._pool.action_space)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)

    def _make(self, seed: int) -> Any:
        import envpool

        return envpool.make(
            self.task_id,
            env_type="gymnasium",
            num_envs=self.num_envs,
            seed=int(seed),
            **self._kwargs,
        )

    def _obs(self, obs: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(np.moveaxis(obs, 1, -1)) if self.is_atari else obs

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets every environment; a seed rebuilds the pool with that seed."""
        if seed is not None:
            self._pool.close()
            self._pool = self._make(seed)
        obs, info = self._pool.reset()
        return self._obs(obs), info

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """One step of every environment (NEXT_STEP autoreset inside envpool)."""
        obs, reward, terminated, truncated, info = self._pool.step(np.asarray(actions))
        return (
            self._obs(obs),
            np.asarray(reward, np.float32),
            np.asarray(terminated, bool),
            np.asarray(truncated, bool),
            info,
        )

    def close_extras(self, **kwargs: Any) -> None:
        """Releases the pool."""
        self._pool.close()
