"""Environment factories: one seeded environment, or a seeded vector of them.

Every vector environment built here uses gymnasium's NEXT_STEP autoreset (the default of
gymnasium 1.x, and the only mode of the fast numpy entry points such as
``CartPoleVectorEnv``): when sub-environment ``i`` ends at step ``t`` (terminated or
truncated), the observation returned at ``t`` is the episode's final observation; the next
``step`` ignores that sub-environment's action and returns the first observation of a new
episode with reward 0 and ``terminated = truncated = False``.

Failing simulators: a sync vector (``mode="sync"``, and ``"auto"`` for every id without a
vectorized entry point, e.g. each ``package.module:Env-v0`` of a user) is a
:class:`~tfagents_vtrace.envs.resilient.ResilientSyncVectorEnv`: a sub-environment that
raises or returns a malformed or non-finite result is made again alone with a new seed and
its episode is cut as by a time limit (``truncated``), while the others go on. An async
vector (:class:`~tfagents_vtrace.envs.resilient.TimedAsyncVectorEnv`) waits at most
``step_timeout_s`` for a step or reset and its sub-environments are wrapped in
:class:`RewardIsNumber`, so that a reward that is not a number (e.g. None) is reported as
such instead of as the NaN the vector would store; a failure there (as in the vectorized
entry points, whose sub-environments cannot be told apart) is the whole vector's, and the
runtime's actor makes it again.

Seeding: :func:`make_vector_env` resets the vector once with ``seed`` (gymnasium seeds
sub-environment ``i`` with ``seed + i`` in sync/async mode, one generator in the vectorized
entry points) and seeds the action spaces, so every later ``reset()`` without a seed and every
episode drawn by autoreset are reproducible from ``seed``.

The training loops these envs feed follow Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561 (many environments per actor, batched inference).
"""

from __future__ import annotations

import importlib.util
import json
import numbers
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv

MODES: tuple[str, ...] = ("auto", "sync", "async", "envpool")


def _family(env_id: str) -> str:
    """ "atari", "minatar" or "gym" from the id's namespace."""
    if env_id.startswith("ALE/"):
        return "atari"
    if env_id.startswith("MinAtar/"):
        return "minatar"
    return "gym"


def check_registered_id(env_id: Any, name: str = "env_id") -> str:
    """``env_id`` if it is a registered gymnasium id; else ValueError naming ``name``.

    For ids read from files (a run directory's ``config.json``): ``gym.make("module:Env-v0")``
    imports ``module``, so an id is data only when it has no ``module:`` prefix and is in the
    registry (the project's ids, gymnasium's, and ``ALE/*`` / ``MinAtar/*`` once their extra
    registers them). Nothing is imported on behalf of the id.

    Raises:
      ValueError: ``"{name}: ..."`` for a non-string, an id with a ``module:`` prefix or an
        id that is not registered.
      ImportError: an ``ALE/*`` or ``MinAtar/*`` id without its extra installed.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"{name}: expected a registered gymnasium id, received {env_id!r}")
    if ":" in env_id:
        raise ValueError(
            f"{name}: {env_id!r} has a 'module:' prefix (gymnasium would import that module); "
            "expected a registered gymnasium id"
        )
    import tfagents_vtrace.envs  # noqa: F401 - registers the project's ids

    family = _family(env_id)
    if family != "gym":
        from tfagents_vtrace.envs import atari

        if family == "atari":
            atari._register_ale()
        else:
            atari._register_minatar()
    if env_id not in gym.registry:
        raise ValueError(
            f"{name}: {env_id!r} is not a registered gymnasium id (an environment of your own: "
            "name the module that registers it, --env=package.module:ID)"
        )
    return env_id


def _seed_spaces(env: gym.Env | VectorEnv, seed: int) -> None:
    """Seeds the action and observation spaces' samplers (used by random policies)."""
    env.action_space.seed(seed)
    env.observation_space.seed(seed)
    if isinstance(env, VectorEnv):
        env.single_action_space.seed(seed)
        env.single_observation_space.seed(seed)


def make_env(env_id: str, seed: int | None = None, **env_kwargs: Any) -> gym.Env:
    """Builds one environment, with Atari / MinAtar preprocessing for those ids.

    Args:
      env_id: a registered gymnasium id (``tfagents_vtrace.envs`` registers its own ids on
        import), ``"ALE/<Game>-v5"`` (needs the ``atari`` extra) or ``"MinAtar/<Game>-v1"``
        (needs the ``minatar`` extra).
      seed: when given, the environment is reset once with it and its spaces are seeded, so
        later ``reset()`` calls without a seed are reproducible.
      **env_kwargs: passed to the environment's constructor (e.g. ``num_trials`` for the
        bandits).

    Returns:
      A ``gymnasium.Env``. Atari observations are uint8 ``[84, 84, 4]``; MinAtar ones are
      ``[10, 10, C]`` (uint8 by default).
    """
    family = _family(env_id)
    if family == "atari":
        from tfagents_vtrace.envs import atari

        env = atari.make_atari_env(env_id, **env_kwargs)
    elif family == "minatar":
        from tfagents_vtrace.envs import atari

        env = atari.make_minatar_env(env_id, **env_kwargs)
    else:
        env = gym.make(env_id, **env_kwargs)
    if seed is not None:
        env.reset(seed=int(seed))
        _seed_spaces(env, int(seed))
    return env


def _check_vector_args(num_envs: int, mode: str) -> None:
    """Raises ValueError for a bad ``num_envs`` or ``mode``."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs: expected a positive int, received {num_envs!r}")
    if mode not in MODES:
        raise ValueError(f"mode: expected one of {MODES}, received {mode!r}")


def env_action(action: Any, space: gym.Space) -> np.ndarray:
    """``action`` as environments of action space ``space`` take it: in the space's dtype,
    and, for a ``Box``, clipped to its bounds (a Gaussian policy's samples, and its mean, are
    unbounded). ``space`` may be a single or a vector env's batched space. Only what goes
    to ``env.step`` is clipped: the acting loops record the policy's own draw, whose
    log-probability the learners score (as Stable-Baselines3's ``collect_rollouts`` keeps
    the unclipped action in its buffer, https://github.com/DLR-RM/stable-baselines3/blob/master/stable_baselines3/common/on_policy_algorithm.py)."""
    if isinstance(space, gym.spaces.Box):
        return np.clip(action, space.low, space.high).astype(space.dtype, copy=False)
    return np.asarray(action).astype(space.dtype, copy=False)


_NUMBER_TYPES = frozenset({float, int, bool, np.float64, np.float32, np.int64, np.int32})


class RewardIsNumber(gym.Wrapper):
    """Raises ``ValueError("reward: expected a finite number, received ...")`` when a step's
    reward is not a number (e.g. None). Wraps each sub-environment of an async vector (the
    resilient sync vector checks the same itself): gymnasium stores the rewards in a float
    array, where a None would become NaN and be
    reported as one. Finiteness is checked on the whole vector by the acting loops
    (``runtime.env_failures.check_env_output``); here only the type, one set lookup a step."""

    def step(self, action):
        result = self.env.step(action)
        reward = result[1]
        if type(reward) not in _NUMBER_TYPES and not _is_number(reward):
            raise ValueError(f"reward: expected a finite number, received {reward!r}")
        return result


def _is_number(value: Any) -> bool:
    """A real number, or a numeric numpy array (a 0-d reward some environments return)."""
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "biuf"
    return isinstance(value, numbers.Real)


def _gym_vector(env_id: str, num_envs: int, mode: str, env_kwargs: dict,
                step_timeout_s: float | None = None) -> VectorEnv:  # fmt: skip
    """Vector env of a plain gymnasium id: vector entry point when 'auto' and available,
    else a resilient sync vector (module docstring)."""
    from tfagents_vtrace.envs.resilient import ResilientSyncVectorEnv, TimedAsyncVectorEnv

    spec = gym.spec(env_id)
    if mode == "auto":
        vmode = "vector_entry_point" if spec.vector_entry_point is not None else "sync"
    else:
        vmode = mode
    if vmode == "sync":
        make_one = _SubEnv(env_id, env_kwargs, wrap=False)
        return ResilientSyncVectorEnv([make_one] * num_envs, name=env_id)
    if vmode == "async":
        return TimedAsyncVectorEnv(
            [_SubEnv(env_id, env_kwargs, wrap=True)] * num_envs, name=env_id,
            step_timeout_s=step_timeout_s, autoreset_mode=AutoresetMode.NEXT_STEP,
        )  # fmt: skip
    vector_kwargs, wrappers = {}, ()
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode=vmode,
        vector_kwargs=vector_kwargs,
        wrappers=wrappers,
        **env_kwargs,
    )
    if env.metadata.get("autoreset_mode") != AutoresetMode.NEXT_STEP:
        # A third-party vector entry point with another autoreset mode: use sync instead.
        env.close()
        return _gym_vector(env_id, num_envs, "sync", env_kwargs)
    return env


class _SubEnv:
    """``gym.make(env_id, **env_kwargs)``, wrapped in :class:`RewardIsNumber` when ``wrap``:
    one sub-environment of a sync or async vector (picklable, for async processes)."""

    def __init__(self, env_id: str, env_kwargs: dict, wrap: bool):
        self.env_id, self.env_kwargs, self.wrap = env_id, dict(env_kwargs), wrap

    def __call__(self) -> gym.Env:
        env = gym.make(self.env_id, **self.env_kwargs)
        return RewardIsNumber(env) if self.wrap else env


def make_vector_env(
    env_id: str, num_envs: int, seed: int, *, mode: str = "auto",
    step_timeout_s: float | None = None, **env_kwargs: Any,
) -> VectorEnv:  # fmt: skip
    """Builds ``num_envs`` copies of ``env_id`` as one seeded gymnasium ``VectorEnv``.

    Args:
      env_id: as in :func:`make_env`.
      num_envs: number of sub-environments B; observations are ``[B, *obs_shape]``, rewards,
        ``terminated`` and ``truncated`` are ``[B]``.
      seed: seeds the first reset and the spaces (see the module docstring).
      mode: ``"auto"`` (the env's vectorized entry point when it has one, e.g. CartPole,
        CartPoleNoVel, the bandits, ALE's threaded ``AtariVectorEnv``; otherwise sync),
        ``"sync"`` (a resilient ``SyncVectorEnv``, one process), ``"async"``
        (``AsyncVectorEnv``, one process per sub-environment, for heavy envs) or
        ``"envpool"`` (when installed).
      step_timeout_s: async mode: seconds a step or reset may take before the vector's
        processes are terminated and ``EnvTimeout`` raised (None: no limit).
      **env_kwargs: passed to each environment's constructor.

    Returns:
      A ``gymnasium.vector.VectorEnv`` with NEXT_STEP autoreset, already reset once.

    Raises:
      ValueError: bad ``num_envs`` or ``mode``.
      ImportError: ``mode="envpool"`` without envpool, or an Atari / MinAtar id without its
        extra.
    """
    _check_vector_args(num_envs, mode)
    from tfagents_vtrace.envs.multi_agent import check_mode

    check_mode(env_id, mode)
    family = _family(env_id)
    if mode == "envpool":
        env = _envpool_vector(env_id, num_envs, int(seed), env_kwargs)
    elif family == "atari":
        from tfagents_vtrace.envs import atari

        env = atari.make_atari_vector_env(env_id, num_envs, mode, **env_kwargs)
    elif family == "minatar":
        from tfagents_vtrace.envs import atari

        env = atari.make_minatar_vector_env(env_id, num_envs, mode, **env_kwargs)
    else:
        env = _gym_vector(env_id, num_envs, mode, env_kwargs, step_timeout_s)
    env.reset(seed=int(seed))
    _seed_spaces(env, int(seed))
    return env


def vector_env_factory(env_id: str, mode: str = "auto", env_kwargs: dict | None = None,
                       step_timeout_s: float | None = None):  # fmt: skip
    """``(num_envs, seed) -> VectorEnv``: :func:`make_vector_env` of ``env_id`` in ``mode``
    with ``env_kwargs`` (a run's environments: ``RunConfig.env_kwargs``) and
    ``step_timeout_s``."""
    kwargs = dict(env_kwargs or {})
    return lambda num_envs, seed: make_vector_env(
        env_id, num_envs, seed, mode=mode, step_timeout_s=step_timeout_s, **kwargs
    )


def _has_module(name: str) -> bool:
    """Whether ``name`` can be imported (an optional extra is installed)."""
    return importlib.util.find_spec(name) is not None


def _envpool_vector(env_id: str, num_envs: int, seed: int, env_kwargs: dict) -> VectorEnv:
    """An envpool-backed VectorEnv (see :mod:`tfagents_vtrace.envs.envpool_adapter`)."""
    if not _has_module("envpool"):
        raise ImportError(
            "mode='envpool' needs the envpool package: pip install 'tfagents_vtrace[envpool]' "
            "(or use mode='auto', 'sync' or 'async')"
        )
    from tfagents_vtrace.envs import envpool_adapter

    return envpool_adapter.EnvpoolVectorEnv(env_id, num_envs, seed, **env_kwargs)


class EnvSpaces(NamedTuple):
    """The single (unbatched) spaces of an environment."""

    observation: gym.Space
    action: gym.Space


_SPACES: dict[str, EnvSpaces] = {}


def env_spaces(env_id: str, env_kwargs: dict | None = None) -> EnvSpaces:
    """The spaces of ``env_id`` made with ``env_kwargs``: one environment is made to read
    them the first time, and the same :class:`EnvSpaces` answers every later call of this
    process (networks, space checks and exports read the spaces many times in a run; making
    an environment can take seconds, an Atari one or a user's own).

    Raises whatever making the environment raises.
    """
    kwargs = dict(env_kwargs or {})
    try:
        key = json.dumps([env_id, kwargs], sort_keys=True)
    except (TypeError, ValueError):  # arguments that are no JSON: read them each time
        key = None
    if key is not None and key in _SPACES:
        return _SPACES[key]
    env = make_env(env_id, **kwargs)
    try:
        spaces = EnvSpaces(env.observation_space, env.action_space)
    finally:
        env.close()
    if key is not None:
        _SPACES[key] = spaces
    return spaces
