"""Agents layer: one folder per algorithm, selected by name through a small registry.

An agent package (e.g. :mod:`tfagents_vtrace.agents.impala`) exports ``SPEC``, its
:class:`~tfagents_vtrace.agents.spec.AgentSpec`: the config class (a frozen dataclass
validated in ``__post_init__``: a bad value raises ``ValueError`` naming the field), its
``run_agent`` (its learner fed by actors, or its own process shape: A3C's workers, ACER's
replay, TAAC's per-step updates), the network it needs, how its runs export and which
spaces it takes. The
runtime and the commands ask the spec for these parts and nothing else, so a new agent plugs
in by :func:`register_agent`. Packages are imported lazily, so looking up a name costs
nothing until the agent is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfagents_vtrace.agents.spec import AgentSpec

_REGISTRY: dict[str, str | AgentSpec] = {
    "impala": "tfagents_vtrace.agents.impala",
    "a2c": "tfagents_vtrace.agents.a2c",
    "a3c": "tfagents_vtrace.agents.a3c",
    "acer": "tfagents_vtrace.agents.acer",
    "taac": "tfagents_vtrace.agents.taac",
}


def register_agent(name: str, spec: str | AgentSpec) -> None:
    """Registers (or replaces) agent ``name``: ``spec`` is its
    :class:`~tfagents_vtrace.agents.spec.AgentSpec`, or the path of a package exporting it as
    ``SPEC`` (imported when the agent is first used). An agent registered from outside the
    package trains, resumes and exports as the built-in ones do: the runtime and the
    commands ask its spec for everything (its spaces included)."""
    from tfagents_vtrace.agents.spec import AgentSpec

    if not name or not isinstance(name, str):
        raise ValueError(f"name: expected a non-empty str, received {name!r}")
    if isinstance(spec, AgentSpec):
        if spec.name != name:
            raise ValueError(f"spec: its name is {spec.name!r}, registered as {name!r}")
    elif not (isinstance(spec, str) and spec):
        raise ValueError(f"spec: expected an AgentSpec or a module path, received {spec!r}")
    _REGISTRY[name] = spec


def agent_names() -> tuple[str, ...]:
    """Names of the registered agents, sorted."""
    return tuple(sorted(_REGISTRY))


def get_agent(name: str) -> AgentSpec:
    """The :class:`~tfagents_vtrace.agents.spec.AgentSpec` of the agent registered as ``name``
    (its package's ``SPEC``).

    Raises:
      ValueError: ``name`` is not registered.
    """
    if name not in _REGISTRY:
        raise ValueError(f"agent: expected one of {agent_names()}, received {name!r}")
    spec = _REGISTRY[name]
    return importlib.import_module(spec).SPEC if isinstance(spec, str) else spec


__all__ = ["agent_names", "get_agent", "register_agent"]
