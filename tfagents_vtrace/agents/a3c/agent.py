"""A3C on the run driver: asynchronous workers updating one global network.

Mnih et al., "Asynchronous Methods for Deep Reinforcement Learning", 2016,
https://arxiv.org/abs/1602.01783. ``num_workers`` :class:`~tfagents_vtrace.agents.a3c.worker.
Worker` iterations run on a :class:`~tfagents_vtrace.runtime.workers.WorkerPool` (each with
``num_envs`` environments and ``t_max``-step rollouts); the driver's thread only watches,
evaluates and checkpoints, holding the shared optimizer's lock while it copies the weights
or saves, so a checkpoint never holds half an update. The run ends within one rollout of
``total_steps``: ``total_steps <= step < total_steps + t_max * num_envs``. The final row
adds ``worker_steps`` (environment steps per worker in this process).
"""

from __future__ import annotations

import math

from tfagents_vtrace.agents import placement
from tfagents_vtrace.agents.a3c.config import A3CConfig
from tfagents_vtrace.agents.a3c.shared import A3CLearner
from tfagents_vtrace.agents.a3c.worker import Worker
from tfagents_vtrace.runtime.actor import ActorSpec
from tfagents_vtrace.runtime.driver import NetworkAgent
from tfagents_vtrace.runtime.workers import WorkerPool


class A3CAgent(NetworkAgent):
    """The run agent of A3C (module docstring); ``record_order`` keeps the worker id of every
    shared update in ``learner.shared.order`` (tests)."""

    def __init__(self, run, config, network_config, strategy=None, env_factory=None,
                 record_order: bool = False):  # fmt: skip
        placement.check_local_agent(run, strategy, config, A3CConfig, "A3C")
        self.run_config, self.config, self.network_config = run, config, network_config
        self.env_factory, self.pool, self.workers = env_factory, None, []
        self.learner = A3CLearner(
            config, self.build_network, record_order=record_order, total_steps=run.total_steps,
            total_updates=math.ceil(run.total_steps / (config.t_max * run.num_envs)),
        )  # fmt: skip
        self.lock, self.max_nonfinite_updates = (
            self.learner.shared.lock,
            config.max_nonfinite_updates,
        )

    def start(self, counters) -> None:
        run, factory, restart = self.run_config, self.env_factory, counters.env_steps
        spec = ActorSpec(run.env_id, self.network_config, run.num_envs, self.config.t_max,
                         seed=run.seed + 7919 * restart, env_mode=run.env_mode,
                         policy_impl=run.policy_impl, env_kwargs=run.env_kwargs)  # fmt: skip
        env_factory = None if factory is None else lambda seed: factory(run.num_envs, seed)
        self.workers = [
            Worker(i, self.learner, spec, self.build_network(), counters, env_factory)
            for i in range(self.config.num_workers)
        ]
        steps = self.config.t_max * run.num_envs
        self.pool = WorkerPool(
            self.workers, steps, restart, run.total_steps, deterministic=run.deterministic
        )
        self.pool.start()

    def advance(self) -> dict:
        return self.pool.advance()

    def row_fields(self, times: dict | None) -> dict:
        return {"worker_steps": [int(w.steps) for w in self.workers]} if times is None else {}

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()
