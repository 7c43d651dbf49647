"""The Python API: train an agent on your own environment, load the policy, play it.

::

    import tfagents_vtrace as tv

    final = tv.train("impala", env=MyEnv, logdir="runs/mine", total_steps=300_000, seed=0)
    policy = tv.load_policy(final["policy"])
    tv.evaluate(policy, MyEnv, episodes=20)    # {"mean_return": ..., ...}

:func:`train` is the run ``tfv-train`` gives (the command line is a shell
over it): the run directory's lock, refusal of a foreign directory, resume by the same call,
Ctrl-C saving a checkpoint, the export to ``logdir/policy``.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from tfagents_vtrace.export.playing import Policy, evaluate, load_policy

__all__ = [
    "Policy",
    "config_path",
    "evaluate",
    "load_policy",
    "make_configs",
    "make_network",
    "train",
]

CONFIG_DIR = os.path.join(os.path.dirname(__file__), "configs")
# A shipped config's name: a file name of CONFIG_DIR (no separator, not hidden, no "..").
_CONFIG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def config_path(name: str | os.PathLike) -> str:
    """The flagfile ``name`` names: a ``.cfg`` file's path, or a shipped config's name.

    A *path* holds a path separator (``configs/mine.cfg``, ``/abs/mine.cfg``), or is a file of
    the working directory whose name ends in ``.cfg``; it must be an existing ``.cfg`` file
    (any other file is read with absl's ``--flagfile=PATH``, which names it as a flagfile).
    Anything else is a *name*: ``impala_cartpole`` or ``impala_cartpole.cfg`` in
    :data:`CONFIG_DIR`. A name never leaves that folder: ``../x`` is a path, and a name
    starting with a dot is refused.

    Raises:
      ValueError: ``config: ...`` naming ``name``, when it is a path that is not an existing
        ``.cfg`` file, or a name of no shipped config.
    """
    name = os.fspath(name)
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    if any(sep in name for sep in separators) or (name.endswith(".cfg") and os.path.isfile(name)):
        if not os.path.isfile(name):
            raise ValueError(f"config: no file {name!r}")
        if not name.endswith(".cfg"):
            raise ValueError(
                f"config: {name!r} is not a .cfg flagfile (a path given as a config ends in "
                ".cfg; read another file with --flagfile=PATH)"
            )
        return name
    if _CONFIG_NAME.fullmatch(name):
        shipped = os.path.join(CONFIG_DIR, name if name.endswith(".cfg") else f"{name}.cfg")
        if os.path.isfile(shipped):
            return shipped
    names = sorted(n[:-4] for n in os.listdir(CONFIG_DIR)) if os.path.isdir(CONFIG_DIR) else []
    raise ValueError(f"config: no file {name!r} and no shipped config of that name ({names})")


def make_configs(
    agent: str | None = None, env: Any = None, *, flagfile: str | None = None, **settings: Any
):
    """The typed configs (:class:`~tfagents_vtrace.settings.RunConfigs`) of a run:
    ``flagfile``'s settings (a ``.cfg`` path or a shipped config's name: :func:`config_path`),
    then ``settings`` over them; ``agent`` and ``env`` default to the flagfile's, else
    ``"impala"`` on ``"CartPole-v1"``.
    A setting's deprecated name (``entropy_start``) is read as its name now, with a warning.
    The environment's spaces are checked against the agent's before anything is built.

    Raises:
      ValueError: naming the setting, the agent or the space that is refused.
    """
    from tfagents_vtrace.envs.user_envs import resolve_env
    from tfagents_vtrace.settings import (
        build_configs,
        check_spaces,
        read_flagfile,
        rename_deprecated,
    )

    values: dict[str, Any] = dict(read_flagfile(config_path(flagfile))) if flagfile else {}
    agent = agent or values.pop("agent", None) or "impala"
    values.pop("agent", None)
    env = env if env is not None else values.get("env", "CartPole-v1")
    values.update(rename_deprecated(settings))  # the keywords override the flagfile
    values["env"] = resolve_env(env)
    configs = build_configs(agent, values)
    check_spaces(agent, configs.run_config)
    return configs


def make_network(
    agent: str | None = None, env: Any = None, *, flagfile: str | None = None, **settings: Any
):
    """The policy network a run of ``agent`` on ``env`` with these settings trains (the same
    arguments as :func:`train`, no ``logdir``), built for the environment's spaces with fresh
    weights: a Keras model, so ``tv.make_network(env="CartPole-v1").summary()`` shows its
    layers, a torso of one's own included.

    Raises:
      ValueError: as :func:`make_configs`; naming ``agent`` for an agent that builds its own
        networks (TAAC).
    """
    from tfagents_vtrace.envs import env_spaces
    from tfagents_vtrace.networks import make_network as build

    configs = make_configs(agent, env, flagfile=flagfile, **settings)
    if not configs.spec.actor_critic_network:
        raise ValueError(
            f"agent: {configs.agent!r} builds its own networks, not the actor-critic network"
        )
    run = configs.run_config
    spaces = env_spaces(run.env_id, run.env_kwargs)
    return build(configs.network_config, spaces.observation, spaces.action)


def train(
    agent: str | None = None,
    env: Any = None,
    logdir: str | os.PathLike | None = None,
    *,
    flagfile: str | os.PathLike | None = None,
    overwrite: bool = False,
    strategy: str = "default",
    callbacks: list | None = None,
    verbose: int = 1,
    **settings: Any,
) -> dict:
    """Trains ``agent`` on ``env`` into run directory ``logdir``; returns the final row
    (``eval_return``, ``step``, ``wall_time``, ... and ``policy``, the exported SavedModel).

    Args:
      agent: "impala", "a2c", "a3c", "acer" or "taac" (default: the flagfile's, else impala).
      env: a registered gymnasium id (``"package.module:Env-v0"`` imports the module), a
        ``gymnasium.Env`` class or a function returning a new environment (wrappers
        included); the network is built for its spaces.
      logdir: the run directory. Calling again with the same arguments resumes the run (or
        returns its final row with ``already_finished`` when it ended).
      flagfile: a ``.cfg`` flagfile's path or a shipped config's name (:func:`config_path`);
        ``settings`` override it.
      overwrite: replace a previous run in ``logdir`` (only its own files are removed).
      strategy: the learner's ``tf.distribute`` strategy ("default", "mirrored",
        "multi_worker").
      callbacks: objects with any of ``on_row(row)``, ``on_checkpoint(step, path)``,
        ``on_end(final_row)``, or functions (taken as ``on_row``), called in the learner's
        thread; ``on_row`` returning True ends the run at that row (checkpointed, exported,
        the final row marked ``"stopped_by": "callback"``; the same call later trains on to
        ``total_steps``). Built-in ones: :mod:`tfagents_vtrace.callbacks`
        (docs/guide/extending.md). Not with ``strategy="multi_worker"``.
      verbose: 1 shows the progress line and the start lines (today's output); 0 neither
        (warnings and errors still show).
      **settings: any setting by its flag's name (``total_steps``, ``seed``, ``num_envs``,
        ``learning_rate``, ``hidden_sizes``...), validated as the flags are. ``torso`` and
        ``core`` also take a layer of your own: a ``keras.layers.Layer`` subclass (an RNN
        cell for ``core``), a function ``(observation_space) -> layer``, or its path
        ``"package.module:Name"`` (docs/guide/extending.md).

    Raises:
      ValueError: a bad setting, an environment or space the agent does not take, a refused
        ``logdir``; ``RunDirLockedError``, ``RunInterrupted`` (Ctrl-C, after a checkpoint),
        ``ActingError``, ``WriteError`` and ``CheckpointError`` as
        :func:`tfagents_vtrace.runtime.run.run`; ``CallbackError`` (one line naming the
        callback and its hook, chained from what it raised) when a callback raised, after a
        checkpoint of the newest state (the same call resumes from it).
    """
    from tfagents_vtrace.runtime.callbacks import CallbackList
    from tfagents_vtrace.runtime.run import run

    start = time.time()
    if logdir is None:
        raise ValueError("logdir: required (the run directory to write, or to resume)")
    if verbose not in (0, 1):  # False and True too
        raise ValueError(f"verbose: expected 0 or 1, received {verbose!r}")
    callbacks = CallbackList(callbacks)  # a bad one is refused before anything is built
    configs = make_configs(agent, env, flagfile=flagfile, **settings)
    return run(
        configs,
        os.fspath(logdir),
        strategy=strategy,
        overwrite=overwrite,
        start_time=start,
        callbacks=callbacks,
        verbose=verbose,
    )
