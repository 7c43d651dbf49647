"""A3C on the run driver: asynchronous workers updating one global network.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783. ``num_workers`` :class:`~tfagents_vtrace.agents.a3c.worker.
Worker` iterations run on a :class:`~tfagents_vtrace.runtime.acting.workers.WorkerPool` (each with
``num_envs`` environments and ``t_max``-step rollouts); the driver's thread only watches,
evaluates and checkpoints, holding the shared optimizer's lock while it copies the weights
or saves, so a checkpoint never holds half an update. The run ends within one rollout of
``total_steps``: ``total_steps <= step < total_steps + t_max * num_envs``. The final row
adds ``worker_steps`` (environment steps per worker in this process). A worker whose
environment hangs past ``env_step_timeout_s`` is replaced by a new one with new environments
(:mod:`~tfagents_vtrace.runtime.acting.workers`), its claimed steps given back to the budget.

With ``backend="ray"`` each worker is a Ray actor process that returns gradients and the
driver's thread applies them (the parameter server):
:mod:`~tfagents_vtrace.agents.a3c.ray_workers`. ``deterministic`` is refused with Ray
(``RunConfig``), as for IMPALA.
"""

from __future__ import annotations

import dataclasses
import math

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import A3CLearner
from tfagents_vtrace.agents.a3c.worker import Worker
from tfagents_vtrace.runtime.run_agent import NetworkAgent


class A3CAgent(NetworkAgent):
    """The run agent of A3C (module docstring); ``record_order`` keeps the worker id of every
    shared update in ``learner.shared.order`` (tests)."""

    def __init__(self, run, config, network_config, strategy=None, env_factory=None,
                 record_order: bool = False):  # fmt: skip
        placement.check_config(config, A3CConfig)
        if run.backend == "ray":  # workers in Ray processes; ImportError without Ray
            placement.refuse_normalization("a3c with backend='ray'", config, network_config)
            from tfagents_vtrace.runtime.acting.ray_backend import import_ray

            import_ray()
        placement.require_single_replica(strategy, "A3C")
        super().__init__(run, config, network_config, env_factory)
        self.learner = A3CLearner(
            config, self.build_network, record_order=record_order, total_steps=run.total_steps,
            total_updates=math.ceil(run.total_steps / (config.t_max * run.num_envs)),
        )  # fmt: skip
        self.lock = self.learner.shared.lock
        self.workers: list = []

    def start(self, counters) -> None:
        run, restart, env_factory = self.run_config, counters.env_steps, self.actor_env_factory()
        spec = dataclasses.replace(self.actor_spec(self.config.t_max, restart),
                                   env_step_timeout_s=run.env_step_timeout_s)  # fmt: skip
        if run.backend == "ray":
            from tfagents_vtrace.agents.a3c.ray_workers import RayWorkers

            self.source = RayWorkers.from_run(
                run, spec, self.learner, counters, restart, env_factory=self.env_factory
            )
            self.source.start()
            return
        self.workers = [
            Worker(i, self.learner, spec, self.build_network(), counters, env_factory,
                   network_factory=self.build_network)
            for i in range(self.config.num_workers)
        ]  # fmt: skip
        self.start_workers(self.workers, self.config.t_max * run.num_envs, restart)

    def worker_steps(self) -> list[int]:
        """Environment steps of each worker in this process."""
        if self.workers:
            return [int(w.steps) for w in self.workers]
        return list(getattr(self.source, "worker_steps", []))

    def row_fields(self, times: dict | None) -> dict:
        return {"worker_steps": self.worker_steps()} if times is None else {}
