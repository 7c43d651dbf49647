"""A user's own environment, however it is given, as a gymnasium id the runtime can make.

The runtime makes environments by id (actors, evaluation, the network's spaces, Ray actors),
so :func:`resolve_env` turns what a user passes into one:

* a registered id (``"CartPole-v1"``) is used as it is;
* gymnasium's ``"package.module:Env-v0"``: the module is imported *because the caller named
  it* (it registers ``Env-v0``), and the plain id is used from then on. An id read back from a
  run directory's ``config.json`` never has that prefix and never imports anything
  (:func:`tfagents_vtrace.envs.factory.check_registered_id`);
* a ``gymnasium.Env`` subclass, or any callable returning a new ``gymnasium.Env`` (wrappers
  included): it is registered under ``user/<module>.<name>-v0`` with the callable as its entry
  point, so every copy the run makes is a new environment built by the user's code. The same
  callable gives the same id, so the same call resumes its run. An environment *instance* is
  refused: a run needs one environment per actor and per evaluation;
* a PettingZoo env class, or a callable returning a PettingZoo ``ParallelEnv`` (or an AEC env
  PettingZoo's ``aec_to_parallel`` converts): a game of many agents, registered the same way
  by :func:`tfagents_vtrace.envs.multi_agent.register_game` (a function is called once to see
  what it returns, only when PettingZoo is installed);
* ``"package.module:make_env"`` where the module registers no id of that name but holds a
  class or function of it: that object, as above (the command line's way to name one).
"""

from __future__ import annotations

import re
from typing import Any

import gymnasium as gym

from tfagents_vtrace.utils.user_code import import_module_named, split_path

USER_NAMESPACE = "user"
_UNSAFE = re.compile(r"[^\w.-]+")


def callable_name(env: Any) -> str:
    """``module.qualname`` of a class or function (what ``config.json`` records)."""
    module = getattr(env, "__module__", None) or "unknown"
    name = getattr(env, "__qualname__", None) or getattr(env, "__name__", None)
    return f"{module}.{name or type(env).__qualname__}"


def callable_id(env: Any) -> str:
    """The gymnasium id a callable environment is registered under."""
    name = _UNSAFE.sub("_", callable_name(env)).strip("_.") or "env"
    return f"{USER_NAMESPACE}/{name}-v0"


def resolve_env(env: Any, name: str = "env") -> str:
    """A registered gymnasium id for ``env`` (module docstring).

    Raises:
      ValueError: ``"{name}: ..."`` for an environment instance, a value that is neither an
        id nor a callable, a ``module:`` id whose module registers no such id, or an id that
        is not registered.
      ImportError: the module of a ``module:`` id cannot be imported.
    """
    if isinstance(env, str):
        return _resolve_id(env, name)
    if isinstance(env, gym.Env | gym.vector.VectorEnv):
        raise ValueError(
            f"{name}: received an environment instance ({type(env).__name__}); pass its class, "
            "or a function that returns a new one (a run makes one per actor and evaluation)"
        )
    if not callable(env):
        raise ValueError(
            f"{name}: expected a gymnasium id, a gymnasium.Env class or a function returning "
            f"one, received {env!r}"
        )
    env_id = callable_id(env)
    if _makes_game(env, name):
        from tfagents_vtrace.envs.multi_agent import register_game

        return register_game(env, env_id)
    spec = gym.registry.get(env_id)
    if spec is None or spec.entry_point is not env:
        gym.register(env_id, entry_point=env, disable_env_checker=True)
    return env_id


def _makes_game(env: Any, name: str) -> bool:
    """Whether callable ``env`` is a PettingZoo env class or returns a PettingZoo env (it is
    called once to see; only when PettingZoo is installed, and never for a gymnasium.Env
    class)."""
    from tfagents_vtrace.envs import multi_agent

    if isinstance(env, type) and issubclass(env, gym.Env):
        return False
    if multi_agent.is_game_class(env):
        return True
    if isinstance(env, type) or not multi_agent.pettingzoo_installed():
        return False
    made = env()
    if isinstance(made, gym.Env | gym.vector.VectorEnv):
        made.close()
        return False
    if multi_agent.is_parallel_env(made) or multi_agent.is_aec_env(made):
        made.close()
        return True
    raise ValueError(
        f"{name}: {callable_name(env)}() returned a {type(made).__name__}, not a gymnasium.Env "
        "or a PettingZoo env"
    )


def _resolve_id(env_id: str, name: str) -> str:
    import tfagents_vtrace.envs  # noqa: F401 - registers the project's ids

    if ":" in env_id:
        module, env_id = split_path(env_id, name, "package.module:Env-v0")
        imported = import_module_named(module, name)
        maker = getattr(imported, env_id, None)
        if env_id not in gym.registry and callable(maker):  # package.module:make_env
            return resolve_env(maker, name)
        if env_id not in gym.registry:
            raise ValueError(
                f"{name}: importing {module!r} registered no environment {env_id!r} "
                "(it should call gymnasium.register)"
            )
        return env_id
    from tfagents_vtrace.envs.factory import check_registered_id

    return check_registered_id(env_id, name)
