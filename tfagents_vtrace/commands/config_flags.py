"""absl flags generated from the config dataclasses: each hyperparameter is declared once.

Every field of ``RunConfig``, ``NetworkConfig``, ``EnvFamilyConfig`` and each registered
agent's ``Config`` (but one marked ``{SETTING: False}``, e.g. ``RunConfig.env_kwargs``) is a
flag of ``tfv-train`` with the field's name (``RunConfig.env_id`` is ``--env`` and
``export_policy`` is ``--export``, the names of ``settings.RUN_NAMES``), its type
and its documentation (the docstring under the field, or the comment above it). The flag's
default is the default of the agent named by ``--agent`` on the command line or in a flagfile
(:func:`agent_from_argv`), so ``--agent=a2c --help`` shows A2C's own defaults, and a flag the
user did not pass leaves the agent's default in place.

A flag that is a field of other agents only is still declared (flagfiles may carry it), but
passing it with an agent that has no such field is an error naming the flag and the agents
that have it, instead of a setting that silently does nothing.

Types: ``bool``, ``int``, ``float`` and ``str`` become the absl flags of that type; ``X | None``
accepts ``none`` (any case) for None; ``tuple[int, ...]`` / ``tuple[float, float]`` are
comma-separated lists (``--hidden_sizes=256,256``).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import typing
from collections.abc import Iterable, Sequence
from typing import Any

from absl import flags

from tfagents_vtrace.settings import setting_fields, unwrap_optional
from tfagents_vtrace.utils.flagfiles import FlagfileError, expand_flagfiles

FLAGS = flags.FLAGS
DEFAULT_AGENT = "impala"


def agent_from_argv(argv: Sequence[str], default: str = DEFAULT_AGENT) -> str:
    """The value of the last ``--agent`` in ``argv[1:]``, flagfiles expanded
    (:func:`~tfagents_vtrace.utils.flagfiles.expand_flagfiles`), else ``default``.

    Read before the flags are declared, so that their defaults can be the agent's. A broken
    flagfile gives ``default``: :func:`.cli.parse_flags` reports it.
    """
    try:
        args = expand_flagfiles(argv[1:])
    except FlagfileError:
        return default
    name, args = default, iter(args)
    for arg in args:
        if arg == "--":
            break
        for prefix in ("--agent=", "-agent="):
            if arg.startswith(prefix):
                name = arg[len(prefix) :]
        if arg in ("--agent", "-agent"):
            name = next(args, name)
    return name


def field_docs(cls: type) -> dict[str, str]:
    """``{field: text}``: the string literal under each field of ``cls`` (and of its dataclass
    bases), or else the ``#`` comment lines right above it, whitespace collapsed."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            lines, _ = inspect.getsourcelines(klass)
        except (OSError, TypeError):
            continue
        source = textwrap.dedent("".join(lines))
        body = ast.parse(source).body[0].body
        source_lines = source.splitlines()
        for i, stmt in enumerate(body):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            nxt = body[i + 1] if i + 1 < len(body) else None
            if (
                isinstance(nxt, ast.Expr)
                and isinstance(nxt.value, ast.Constant)
                and isinstance(nxt.value.value, str)
            ):
                text = nxt.value.value
            else:
                comments, line = [], stmt.lineno - 2  # the line above, 0-based
                while line >= 0 and source_lines[line].strip().startswith("#"):
                    comments.insert(0, source_lines[line].strip().lstrip("#"))
                    line -= 1
                text = " ".join(comments)
            docs[stmt.target.id] = " ".join(text.split())
    return docs


class _ConfigParser(flags.ArgumentParser):
    """Parses one config field's command-line text into the field's type."""

    def __init__(self, base: Any, optional: bool):
        self.base, self.optional = base, optional
        self.is_tuple = typing.get_origin(base) is tuple
        if self.is_tuple:
            self.item = typing.get_args(base)[0]
        self.syntax_name = (
            f"comma-separated {self.item.__name__}s" if self.is_tuple else base.__name__
        ) + (" or none" if optional else "")

    def parse(self, argument: Any) -> Any:
        if argument is None or not isinstance(argument, str):
            return tuple(argument) if self.is_tuple and argument is not None else argument
        text = argument.strip()
        if self.optional and text.lower() == "none":
            return None
        try:
            if self.is_tuple:
                return tuple(self.item(v) for v in text.split(",") if v.strip())
            if self.base is bool:
                return flags.BooleanParser().parse(text)
            return self.base(text)
        except ValueError:
            raise ValueError(f"expected {self.syntax_name}, received {argument!r}") from None

    def flag_type(self) -> str:
        return self.syntax_name


class _ConfigSerializer(flags.ArgumentSerializer):
    def serialize(self, value: Any) -> str:
        if value is None:
            return "none"
        if isinstance(value, tuple):
            return ",".join(str(v) for v in value)
        return str(value)


@dataclasses.dataclass(frozen=True)
class ConfigFlag:
    """One generated flag: the field it fills and which config classes have it."""

    flag: str
    field: str
    owners: tuple[type, ...]


def _fields(cls: type) -> Iterable[tuple[dataclasses.Field, Any]]:
    hints = typing.get_type_hints(cls)
    for f in setting_fields(cls):
        yield f, hints[f.name]


def define_config_flags(
    classes: Sequence[type], chosen: Sequence[type] = (), rename: dict[str, str] | None = None
) -> dict[str, ConfigFlag]:
    """Declares one flag per field of ``classes`` (first class wins the type and default,
    except that a class in ``chosen`` wins over the others). Returns ``{flag: ConfigFlag}``.
    A field already declared as a flag elsewhere is left alone."""
    rename = rename or {}
    ordered = [c for c in classes if c in chosen] + [c for c in classes if c not in chosen]
    declared: dict[str, ConfigFlag] = {}
    first: dict[str, tuple[dataclasses.Field, Any, str]] = {}
    for cls in ordered:
        docs = field_docs(cls)
        for f, hint in _fields(cls):
            name = rename.get(f.name, f.name)
            entry = declared.get(name, ConfigFlag(name, f.name, ()))
            declared[name] = dataclasses.replace(entry, owners=(*entry.owners, cls))
            first.setdefault(name, (f, hint, docs.get(f.name) or f"{cls.__name__}.{f.name}."))
    for name, (f, hint, doc) in first.items():
        if name in FLAGS:  # declared by hand (none today); leave it alone
            continue
        owners = declared[name].owners
        if not any(c in chosen for c in owners):
            doc = f"[{', '.join(sorted({_agent_label(c) for c in owners}))} only] {doc}"
        base, optional = unwrap_optional(hint)
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if base is bool and not optional:  # a BooleanFlag, so --noNAME works
            flags.DEFINE_bool(name, default, doc)
        else:
            flags.DEFINE(
                _ConfigParser(base, optional), name, default, doc, serializer=_ConfigSerializer()
            )
    return declared


def _agent_label(cls: type) -> str:
    module = cls.__module__.split(".")
    return module[2] if module[:2] == ["tfagents_vtrace", "agents"] else cls.__name__
