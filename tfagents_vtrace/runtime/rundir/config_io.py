"""The JSON files of a run directory: ``config.json`` and ``final.json`` written atomically as
strict JSON (``null`` for non-finite values), read back as data.

``config.json`` holds the agent name, env id and the agent, network and run configs (enough
to rebuild the network, see :func:`tfagents_vtrace.runtime.rundir.checkpointing.restore_network`).
Values read from it are data, never code: an env id must be a registered gymnasium id
(:func:`read_env_id`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
from typing import Any

import numpy as np


def _jsonable(value: Any) -> Any:
    """``value`` as JSON values: dataclasses and tuples become dicts and lists, numpy scalars
    Python ones, and non-finite floats (NaN, inf) ``None``."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _jsonable(v) for k, v in dataclasses.asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def dumps(value: Any, **kwargs) -> str:
    """Strict JSON text of ``value`` (see :func:`_jsonable`): ``null`` where a float is not
    finite, never the bare ``NaN`` / ``Infinity`` that strict parsers reject."""
    return json.dumps(_jsonable(value), allow_nan=False, **kwargs)


def write_config(logdir: str, config: dict, name: str = "config.json") -> str:
    """Writes ``config`` (dataclasses allowed) to ``DIR/name`` atomically, as strict JSON;
    returns the path."""
    text = dumps(config, indent=2, sort_keys=True)  # a value JSON cannot hold fails here
    os.makedirs(logdir, exist_ok=True)
    path = os.path.join(logdir, name)
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:  # e.g. a full disk: no partial file is left behind
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    return path


def run_config_dict(agent_name: str, run, agent_config, network_config) -> dict:
    """What ``config.json`` holds: agent name, env id and the agent, network and run configs
    (enough to rebuild the network, see :func:`restore_network`), as JSON values."""
    config = {
        "agent": agent_name,
        "env_id": run.env_id,
        "agent_config": agent_config,
        "network_config": network_config,
        "run_config": run,
    }
    # Fields a checkpoint's shapes depend on besides the network's (e.g. TAAC's own MLPs,
    # a replay laid out per environment): a resume that changes one is refused.
    fixed = getattr(type(agent_config), "RESUME_FIXED", ())
    config["resume_fixed"] = [f"agent_config.{name}" for name in fixed] + [
        f"run_config.{name}" for name in getattr(type(agent_config), "RUN_RESUME_FIXED", ())
    ]
    return json.loads(dumps(config))


def read_env_kwargs(config: dict, env_id: str) -> dict:
    """The environment constructor arguments of a run's ``config.json`` (``config``, as
    :func:`read_config` returns it: ``run_config.env_kwargs``; ``{}`` for runs written before
    there were any), checked as the environment settings of ``env_id``
    (:meth:`~tfagents_vtrace.envs.family.EnvFamilyConfig.from_env_kwargs`: they are data).
    ValueError when they do not apply to ``env_id``."""
    from tfagents_vtrace.envs.family import EnvFamilyConfig

    run = upgrade_config(config).get("run_config") or {}
    return EnvFamilyConfig.from_env_kwargs(run.get("env_kwargs") or {}, env_id)


def write_run_config(logdir: str, agent_name: str, run, agent_config, network_config) -> str:
    """Writes the run's ``config.json`` (:func:`run_config_dict`)."""
    return write_config(logdir, run_config_dict(agent_name, run, agent_config, network_config))


def read_config(logdir: str) -> dict:
    """Reads ``DIR/config.json``, with the names of an older run's fields as they are now
    (:func:`upgrade_config`).

    Raises:
      ValueError: naming ``logdir``, when there is none or it is not a JSON object.
    """
    path = os.path.join(logdir, "config.json")
    if not os.path.exists(path):
        raise ValueError(f"logdir: no config.json in {logdir!r}")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"logdir: {path!r} is not valid JSON ({e})") from None
    if not isinstance(config, dict):
        raise ValueError(f"logdir: {path!r} is not a JSON object")
    return upgrade_config(config, path)


# Environment settings an older run's config.json holds in its run config.
_OLD_RUN_ENV_FIELDS = ("num_trials", "screen_size", "repeat_action_probability")


def upgrade_config(config: dict, path: str = "config.json") -> dict:
    """``config`` (a run's ``config.json``) as this release writes it: the deprecated names of
    its agent config's fields replaced by their names now (one warning line per name, see
    :func:`tfagents_vtrace.utils.deprecated.rename_deprecated`), and the environment settings
    an older run config held (``num_trials``, ``screen_size``, ``repeat_action_probability``)
    moved into its ``env_kwargs``."""
    from tfagents_vtrace.utils.deprecated import rename_deprecated

    run = config.get("run_config")
    if isinstance(run, dict) and any(name in run for name in _OLD_RUN_ENV_FIELDS):
        run = dict(run)
        old = {name: run.pop(name) for name in _OLD_RUN_ENV_FIELDS if name in run}
        env_kwargs = {name: value for name, value in old.items() if value is not None}
        run["env_kwargs"] = {**env_kwargs, **(run.get("env_kwargs") or {})}
        config = {**config, "run_config": run}
    agent_config = config.get("agent_config")
    if isinstance(agent_config, dict):
        try:
            agent_config = rename_deprecated(agent_config, "", f" (in {path})")
        except ValueError as e:
            raise ValueError(f"logdir: {path!r}: {e}") from None
        config = {**config, "agent_config": agent_config}
    return config


def read_env_id(config: dict, logdir: str) -> str:
    """The env id of a run directory's ``config.json`` (``config``, read from ``logdir``),
    checked to be data: a registered gymnasium id without a ``module:`` prefix (which
    ``gym.make`` would import), see :func:`tfagents_vtrace.envs.factory.check_registered_id`.

    Raises:
      ValueError: ``"env_id: ..."`` naming the id and the file, when it is not such an id.
    """
    from tfagents_vtrace.envs.factory import check_registered_id

    try:
        return check_registered_id(config.get("env_id"), "env_id")
    except ValueError as e:
        raise ValueError(f"{e} (in {os.path.join(logdir, 'config.json')})") from None


def last_json_line(text: str) -> dict:
    """The last line of ``text`` that parses as a JSON object (``{}`` if none): the final
    row that ``tfv-train`` prints."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    return {}


def dataclass_from_dict(cls, data: dict):
    """Builds dataclass ``cls`` from a config.json dict (lists become tuples; unknown keys
    are ignored so older run directories still load)."""
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in names}
    return cls(**kwargs)
