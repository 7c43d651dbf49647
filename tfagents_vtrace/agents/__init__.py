"""Agents layer: one folder per algorithm, selected by name through a small registry.

An agent module (e.g. :mod:`tfagents_vtrace.agents.impala`) exposes

* ``Config``: a frozen dataclass of the agent's hyperparameters, validated in
  ``__post_init__`` (a bad value raises ``ValueError`` naming the field);
* optionally ``network_config_for(network_config, agent_config, env_id) -> NetworkConfig``:
  adjusts the flags' network config to what the agent needs (e.g. ACER adds a Q head);
* optionally ``run_agent(run_config, agent_config, network_config, *, strategy, env_factory)``:
  the agent's :class:`~tfagents_vtrace.runtime.driver.RunAgent` for the run driver (its own
  process shape: A3C's workers, ACER's replay, TAAC's per-step updates); without it the
  driver runs the actor-learner of its ``Learner``
  (:class:`~tfagents_vtrace.runtime.actor_learner.ActorLearner`);
* optionally ``export_run(logdir, path, overwrite=False, fmt="saved_model") -> str``: exports
  the policy of a run directory when it is not the actor-critic network (TAAC), in the
  formats of ``EXPORT_FORMATS`` (default: ``("saved_model",)``), and optionally
  ``check_export(logdir, path, fmt=..., steps=...) -> export_parity.ParityReport``, its
  parity check for ``experiments.export --check``;
* ``Learner``: ``Learner(config, network_factory, strategy=None, total_updates=None)`` with
  ``network``, ``optimizer``, ``train_step(batch) -> dict[str, float]``,
  ``get_weights() -> list[np.ndarray]`` and ``checkpoint_items() -> dict`` (trackables).
  The actor-learner builds it this way; agents with their own ``run_agent`` build their
  learner themselves and may take other arguments (TAAC's needs observation and action sizes).

The runtime (:mod:`tfagents_vtrace.runtime`) only talks to that interface, so A2C, ACER or
TAAC plug in by calling :func:`register_agent`. Modules are imported lazily, so looking up an
agent costs nothing until it is used.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_REGISTRY: dict[str, str] = {
    "impala": "tfagents_vtrace.agents.impala",
    "a2c": "tfagents_vtrace.agents.a2c",
    "a3c": "tfagents_vtrace.agents.a3c",
    "acer": "tfagents_vtrace.agents.acer",
    "taac": "tfagents_vtrace.agents.taac",
}


def register_agent(name: str, module_path: str) -> None:
    """Registers (or replaces) agent ``name`` implemented by the module at ``module_path``."""
    if not name or not isinstance(name, str):
        raise ValueError(f"name: expected a non-empty str, received {name!r}")
    _REGISTRY[name] = module_path


def agent_names() -> tuple[str, ...]:
    """Names of the registered agents, sorted."""
    return tuple(sorted(_REGISTRY))


def get_agent(name: str) -> ModuleType:
    """The agent module registered as ``name`` (it has ``Config`` and ``Learner``).

    Raises:
      ValueError: ``name`` is not registered.
    """
    if name not in _REGISTRY:
        raise ValueError(f"agent: expected one of {agent_names()}, received {name!r}")
    return importlib.import_module(_REGISTRY[name])


__all__ = ["agent_names", "get_agent", "register_agent"]
