"""Atari (ALE) and MinAtar environments with the standard preprocessing.

Atari follows Mnih et al., "Human-level control through deep reinforcement learning", 2015
(the Nature DQN preprocessing) as used by IMPALA (Espeholt et al., 2018,
https://arxiv.org/abs/1802.01561) and revisited by Machado et al., "Revisiting the Arcade
Learning Environment", 2017, https://arxiv.org/abs/1709.06009 (v5 ids: sticky actions 0.25):

* the env's own frame skip is turned off (``frameskip=1``) and the preprocessing repeats each
  action 4 frames, max-pooling the last two;
* up to 30 no-op actions at reset; terminal on life loss *off*; rewards *unclipped* (the
  learner clips);
* 84x84 greyscale frames, the last 4 stacked: uint8 ``[84, 84, 4]`` (channels last).

``mode="auto"`` uses ALE's threaded C++ ``AtariVectorEnv`` (same preprocessing, NEXT_STEP
autoreset); ``"sync"`` / ``"async"`` stack gymnasium's ``AtariPreprocessing`` and
``FrameStackObservation`` wrappers (these need ``opencv-python-headless``).

MinAtar: Young & Tian, "MinAtar: An Atari-Inspired Testbed for Thorough and Reproducible
Reinforcement Learning Experiments", 2019, https://arxiv.org/abs/1903.03176. The ``minatar``
package registers ``MinAtar/<Game>-v0/v1`` with gymnasium (done here, since gymnasium 1.x does
not load plugins); its boolean ``[10, 10, C]`` observations are cast to uint8 (or float32).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

FRAME_SKIP = 4
FRAME_STACK = 4
SCREEN_SIZE = 84
NOOP_MAX = 30

# The preprocessing of the module docstring as its two implementations take it: gymnasium's
# AtariPreprocessing wrapper (modes "sync" / "async", frames stacked by FrameStackObservation)
# and ALE's AtariVectorEnv (mode "auto"). A row per setting: (AtariPreprocessing keyword,
# AtariVectorEnv keyword, value); None where one takes no such keyword (AtariPreprocessing
# always max-pools the last two frames, never clips rewards nor presses FIRE at reset).
_PREPROCESSING = (
    ("noop_max", "noop_max", NOOP_MAX),
    ("frame_skip", "frameskip", FRAME_SKIP),
    ("terminal_on_life_loss", "episodic_life", False),
    ("grayscale_obs", "grayscale", True),
    ("scale_obs", None, False),
    (None, "stack_num", FRAME_STACK),
    (None, "maxpool", True),
    (None, "reward_clipping", False),
    (None, "use_fire_reset", False),
)


def _require(module: str, extra: str, what: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise ImportError(
            f"{what} needs the '{module}' package: pip install 'tfagents_vtrace[{extra}]'"
        )


def _register_ale() -> None:
    _require("ale_py", "atari", "Atari (ALE/*) environments")
    import ale_py

    gym.register_envs(ale_py)


def _keywords(implementation: int) -> dict[str, Any]:
    """The :data:`_PREPROCESSING` keywords of implementation 0 (AtariPreprocessing) or 1
    (AtariVectorEnv)."""
    return {row[implementation]: row[2] for row in _PREPROCESSING if row[implementation]}


def _wrapped_vector_env(env_id, num_envs, mode, wrapper, env_kwargs, **fixed) -> VectorEnv:
    """``num_envs`` envs of ``env_id`` (``fixed`` and ``env_kwargs`` their keywords), each
    wrapped by ``wrapper``, vectorized by gymnasium (``mode``: "sync" / "async"), NEXT_STEP
    autoreset."""
    return gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=mode,
        vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
        wrappers=[wrapper],
        **fixed,
        **env_kwargs,
    )


def _channels_last_space(space: spaces.Box) -> spaces.Box:
    """``[S, H, W]`` uint8 Box -> ``[H, W, S]``."""
    s, h, w = space.shape
    return spaces.Box(low=0, high=255, shape=(h, w, s), dtype=np.uint8)


def _preprocess(env: gym.Env, screen_size: int = SCREEN_SIZE) -> gym.Env:
    """AtariPreprocessing + 4-frame stack + channels last, on an env with ``frameskip=1``."""
    env = gym.wrappers.AtariPreprocessing(env, screen_size=screen_size, **_keywords(0))
    env = gym.wrappers.FrameStackObservation(env, FRAME_STACK)
    return gym.wrappers.TransformObservation(
        env,
        lambda obs: np.ascontiguousarray(np.moveaxis(obs, 0, -1)),
        _channels_last_space(env.observation_space),
    )


def make_atari_env(env_id: str, screen_size: int = SCREEN_SIZE, **env_kwargs: Any) -> gym.Env:
    """One preprocessed Atari env: observations uint8 ``[S, S, 4]`` (``S = screen_size``,
    84 by default; 42 is the A3C meta-RL fork's), unclipped rewards."""
    _register_ale()
    _require("cv2", "atari", "Atari preprocessing (AtariPreprocessing)")
    env_kwargs = {**env_kwargs, "frameskip": 1}
    return _preprocess(gym.make(env_id, **env_kwargs), screen_size)


def make_atari_vector_env(
    env_id: str, num_envs: int, mode: str, screen_size: int = SCREEN_SIZE, **env_kwargs: Any
) -> VectorEnv:
    """``num_envs`` preprocessed Atari envs, uint8 ``[B, S, S, 4]`` (``S = screen_size``),
    NEXT_STEP autoreset.

    ``mode="auto"`` uses ALE's ``AtariVectorEnv`` (C++ threads); ``"sync"`` / ``"async"``
    wrap single envs as :func:`make_atari_env` does.
    """
    _register_ale()
    if mode == "auto":
        env = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="vector_entry_point",
            img_height=screen_size,
            img_width=screen_size,
            autoreset_mode=AutoresetMode.NEXT_STEP,
            **_keywords(1),
            **env_kwargs,
        )
        single = _channels_last_space(env.single_observation_space)
        env = gym.wrappers.vector.TransformObservation(
            env,
            lambda obs: np.ascontiguousarray(np.moveaxis(obs, 1, -1)),
            gym.vector.utils.batch_space(single, num_envs),
            single_observation_space=single,
        )
        # ALE's vector env returns integer rewards; the single-env path returns floats.
        return gym.wrappers.vector.TransformReward(env, lambda r: r.astype(np.float32))
    _require("cv2", "atari", "Atari preprocessing (AtariPreprocessing)")
    wrapper = lambda env: _preprocess(env, screen_size)
    return _wrapped_vector_env(env_id, num_envs, mode, wrapper, env_kwargs, frameskip=1)


def _register_minatar() -> None:
    _require("minatar", "minatar", "MinAtar (MinAtar/*) environments")
    if not any(k.startswith("MinAtar/") for k in gym.registry):
        from minatar.gym import register_envs

        register_envs()


def _cast(obs_dtype: str):
    """Wrapper factory casting MinAtar's boolean observations to ``obs_dtype``."""
    if obs_dtype not in ("uint8", "float32"):
        raise ValueError(f"obs_dtype: expected 'uint8' or 'float32', received {obs_dtype!r}")
    dtype = np.dtype(obs_dtype)

    def wrap(env: gym.Env) -> gym.Env:
        return gym.wrappers.DtypeObservation(env, dtype)

    return wrap


def make_minatar_env(env_id: str, obs_dtype: str = "uint8", **env_kwargs: Any) -> gym.Env:
    """One MinAtar env with observations ``[10, 10, C]`` of ``obs_dtype`` (0/1 values)."""
    _register_minatar()
    return _cast(obs_dtype)(gym.make(env_id, **env_kwargs))


def make_minatar_vector_env(
    env_id: str, num_envs: int, mode: str, obs_dtype: str = "uint8", **env_kwargs: Any
) -> VectorEnv:
    """``num_envs`` MinAtar envs (sync for "auto": they step in microseconds)."""
    _register_minatar()
    mode = "sync" if mode == "auto" else mode
    return _wrapped_vector_env(env_id, num_envs, mode, _cast(obs_dtype), env_kwargs)
