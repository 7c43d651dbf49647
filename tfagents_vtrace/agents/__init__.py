"""Agents layer: one folder per algorithm, selected by name through a small registry.

An agent package (e.g. :mod:`tfagents_vtrace.agents.impala`) exports ``SPEC``, its
:class:`~tfagents_vtrace.agents.spec.AgentSpec`: the config class (a frozen dataclass
validated in ``__post_init__``: a bad value raises ``ValueError`` naming the field), its
learner or its own ``run_agent`` process shape (A3C's workers, ACER's replay, TAAC's
per-step updates), the network it needs, how its runs export and which spaces it takes. The
runtime and the commands ask the spec for these parts and nothing else, so a new agent plugs
in by :func:`register_agent`. Packages are imported lazily, so looking up a name costs
nothing until the agent is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tfagents_vtrace.agents.spec import AgentSpec

_REGISTRY: dict[str, str] = {
    "impala": "tfagents_vtrace.agents.impala",
    "a2c": "tfagents_vtrace.agents.a2c",
    "a3c": "tfagents_vtrace.agents.a3c",
    "acer": "tfagents_vtrace.agents.acer",
    "taac": "tfagents_vtrace.agents.taac",
}


def register_agent(name: str, module_path: str) -> None:
    """Registers (or replaces) agent ``name``: the package at ``module_path`` exports its
    ``SPEC``."""
    if not name or not isinstance(name, str):
        raise ValueError(f"name: expected a non-empty str, received {name!r}")
    _REGISTRY[name] = module_path


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
    return importlib.import_module(_REGISTRY[name]).SPEC


__all__ = ["agent_names", "get_agent", "register_agent"]
