"""A run's typed configs from settings by name: the Python API's keywords, a flagfile's lines.

Each setting is a field of ``RunConfig``, ``NetworkConfig``, ``EnvFamilyConfig`` (the
environment layer's, which makes ``RunConfig.env_kwargs``) or the agent's ``Config``, named as
its command-line flag (``env_id`` is ``env``, ``export_policy`` is ``export``). Values may be
Python values or the text a flagfile holds (``"64,64"``, ``"none"``, ``"true"``): text is parsed
by the field's type, then the dataclasses validate as they do for the command line, so a bad
value raises ``ValueError`` naming the setting. ``torso`` and ``core`` also take a layer of
one's own, its class or function or its path ``"package.module:Name"`` (whose module is
imported: the user named it), recorded as the path
(:func:`tfagents_vtrace.networks.user_layers.resolve`).

A renamed setting's old name (:data:`DEPRECATED_NAMES`) is still read, with a one-line
warning, wherever a name is read: the command line, a flagfile, the Python API's keywords and
a run directory's ``config.json``.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from typing import TYPE_CHECKING, Any

from tfagents_vtrace.runtime.config import SETTING
from tfagents_vtrace.utils.deprecated import (  # noqa: F401 - read here too
    DEPRECATED_NAMES,
    check_deprecated,
    rename_deprecated,
)
from tfagents_vtrace.utils.flagfiles import FlagfileError, flag_texts, flagfile_lines

if TYPE_CHECKING:
    from tfagents_vtrace.agents.spec import AgentSpec

# RunConfig fields whose setting (flag) names differ from the field names.
RUN_NAMES = {"env_id": "env", "export_policy": "export"}


def setting_fields(cls: type) -> list[dataclasses.Field]:
    """The fields of config class ``cls`` that are settings (flags)."""
    return [f for f in dataclasses.fields(cls) if f.metadata.get(SETTING, True)]


def unwrap_optional(hint: Any) -> tuple[Any, bool]:
    """``(X, True)`` for a field type ``X | None``, else ``(hint, False)``."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(hint)) == 2:
            return args[0], True
    return hint, False


def parse_text(name: str, hint: Any, text: str) -> Any:
    """The value of field type ``hint`` written as ``text`` on a command line."""
    base, optional = unwrap_optional(hint)
    text = text.strip()
    if optional and text.lower() == "none":
        return None
    try:
        if typing.get_origin(base) is tuple:
            item = typing.get_args(base)[0]
            return tuple(item(v) for v in text.split(",") if v.strip())
        if base is bool:
            if text.lower() in ("true", "1", "yes"):
                return True
            if text.lower() in ("false", "0", "no"):
                return False
            raise ValueError
        return base(text)
    except (TypeError, ValueError):
        kind = getattr(base, "__name__", str(base)) + (" or none" if optional else "")
        raise ValueError(f"{name}: expected {kind}, received {text!r}") from None


def flag_text(value: Any) -> str:
    """``value`` of a setting as a flag writes it (the inverse of :func:`parse_text`):
    ``true`` / ``false``, ``none``, ``64,64`` for a tuple or list, ``repr`` of a float (it
    reads back equal), else ``str``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "none"
    if isinstance(value, tuple | list):
        return ",".join(flag_text(v) for v in value)
    if isinstance(value, float):
        return repr(float(value))  # numpy's float64 too: its repr names its type
    return str(value)


def _coerce(name: str, hint: Any, value: Any) -> Any:
    if isinstance(value, str) and unwrap_optional(hint)[0] is not str:
        return parse_text(name, hint, value)
    if isinstance(value, list):
        return tuple(value)
    return value


def read_flagfile(path: str | os.PathLike) -> dict[str, str]:
    """``{name: text}`` of a flagfile's flags, its lines read by :func:`flagfile_lines` (the
    project's one reader: nested ``--flagfile=`` lines in place, comments and blank lines
    skipped): ``--name=value`` is its text, ``--name`` "true", ``--noname`` "false"; deprecated
    names renamed (:func:`rename_deprecated`; the file and its nested files are one source)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ValueError(f"flagfile: no such file {path!r}")
    try:
        lines = flagfile_lines(path)
        texts = flag_texts(lines, known=setting_names() | DEPRECATED_NAMES.keys())
    except FlagfileError as e:
        raise ValueError(f"flagfile: {path!r}: {e}") from None
    check_deprecated(texts, "--", f" (in {path})")
    return {DEPRECATED_NAMES.get(name, name): value for name, value in texts.items()}


@dataclasses.dataclass(frozen=True)
class RunConfigs:
    """The typed configs of one run and its agent's spec; ``start_lines``: what the run prints
    on stderr when it starts (e.g. what ``torso="auto"`` resolved to)."""

    agent: str
    spec: AgentSpec
    agent_config: Any
    network_config: Any
    run_config: Any
    start_lines: tuple[str, ...] = ()


def setting_names() -> set[str]:
    """Every setting's name: the run's, the network's and every agent's."""
    from tfagents_vtrace.envs.family import EnvFamilyConfig
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.config import RunConfig

    names = {RUN_NAMES.get(f.name, f.name) for f in setting_fields(RunConfig)}
    for cls in (NetworkConfig, EnvFamilyConfig):
        names |= {f.name for f in setting_fields(cls)}
    return names | set(setting_owners()) | {"agent"}


def setting_owners() -> dict[str, set[str]]:
    """``{setting: agents having it}`` for every agent's own settings."""
    from tfagents_vtrace.agents import agent_names, get_agent

    owners: dict[str, set[str]] = {}
    for name in agent_names():
        for f in setting_fields(get_agent(name).Config):
            owners.setdefault(f.name, set()).add(name)
    return owners


def build_configs(agent: str, settings: dict[str, Any], agent_label: str = "") -> RunConfigs:
    """The configs of a run of ``agent`` with ``settings`` (names as the flags'); fields not
    set keep their defaults. The one builder of a run's configs: the Python API's keywords,
    a flagfile's lines and the command line's given flags all come through it.

    ``agent_label`` names the agent in the message for a setting of other agents only
    (default ``agent 'NAME'``; the command line's ``--agent=NAME``).

    Raises:
      ValueError: naming the setting, for an unknown one, one of other agents only, or a value
        the config refuses; naming ``agent`` for an unknown agent.
    """
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.envs.family import EnvFamilyConfig
    from tfagents_vtrace.networks import NetworkConfig, user_layers
    from tfagents_vtrace.runtime.config import RunConfig

    spec = get_agent(agent)
    settings = rename_deprecated(settings)
    classes = (RunConfig, NetworkConfig, EnvFamilyConfig, spec.Config)
    fields: dict[str, tuple[type, str, Any]] = {}
    for cls in classes:
        hints = typing.get_type_hints(cls)
        for f in setting_fields(cls):
            name = RUN_NAMES.get(f.name, f.name) if cls is RunConfig else f.name
            fields.setdefault(name, (cls, f.name, hints[f.name]))
    kwargs: dict[type, dict[str, Any]] = {cls: {} for cls in classes}
    for name, value in settings.items():
        if name not in fields:
            others = setting_owners().get(name)
            if others:
                label = agent_label or f"agent {agent!r}"
                raise ValueError(
                    f"{name}: not a setting of {label} (it is one of {', '.join(sorted(others))})"
                )
            raise ValueError(f"{name}: not a setting (see the flags of tfv-train)")
        cls, field, hint = fields[name]
        if name in user_layers.KINDS:  # a layer of one's own: its class, function or path
            value = user_layers.resolve(value, name)
        kwargs[cls][field] = _coerce(name, hint, value)
    try:
        run_config = RunConfig(**kwargs[RunConfig])
        env_config = EnvFamilyConfig(**kwargs[EnvFamilyConfig])
        run_config = dataclasses.replace(
            run_config, env_kwargs=env_config.env_kwargs(run_config.env_id)
        )
        network_config = NetworkConfig(**kwargs[NetworkConfig])
        agent_config = spec.Config(**kwargs[spec.Config])
    except ValueError as e:  # "field: message" -> "setting: message"
        field, sep, message = str(e).partition(": ")
        name = RUN_NAMES.get(field, field)
        raise ValueError(f"{name}: {message}" if sep else str(e)) from None
    auto = network_config.torso == "auto"
    network_config = spec.network_config(
        network_config, agent_config, run_config.env_id, run_config.env_kwargs
    )
    if spec.check_run is not None:
        spec.check_run(agent_config, run_config)
    lines = ()
    if auto and spec.actor_critic_network:  # the spaces were read (and cached) just now
        from tfagents_vtrace.envs import env_spaces
        from tfagents_vtrace.networks.multi_input import auto_torso

        torso, why = auto_torso(env_spaces(run_config.env_id, run_config.env_kwargs).observation)
        lines = (f"torso auto -> {torso} ({why})",)
    return RunConfigs(agent, spec, agent_config, network_config, run_config, lines)


def check_spaces(agent: str, run_config) -> None:
    """Raises ``ValueError("env: ...")`` (one line) unless ``agent`` takes the spaces of
    ``run_config``'s environment (:func:`tfagents_vtrace.agents.spaces.check_spaces`); one
    environment is made to read them, before any network is built."""
    from tfagents_vtrace.agents import spaces
    from tfagents_vtrace.envs import env_spaces
    from tfagents_vtrace.envs.multi_agent import check_game_run, game_groups
    from tfagents_vtrace.runtime.groups import check_group_run

    spaces.check_game(agent, run_config.env_id)
    groups = game_groups(run_config.env_id, run_config.env_kwargs) or {None: ()}
    for group in groups:  # each group's spaces (a game of several groups: one policy each)
        kwargs = run_config.env_kwargs if group is None else {**run_config.env_kwargs,
                                                              "group": group}  # fmt: skip
        env = env_spaces(run_config.env_id, kwargs)
        spaces.check_spaces(agent, env.observation, env.action)
    spaces.check_game_run(agent, run_config)
    check_group_run(run_config)
    check_game_run(run_config.env_id, run_config.num_envs, run_config.env_mode,
                   run_config.env_kwargs)  # fmt: skip
    from tfagents_vtrace.runtime.self_play import check_self_play_run

    check_self_play_run(run_config)
