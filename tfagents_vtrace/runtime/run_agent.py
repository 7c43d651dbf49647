"""What the run driver calls on an agent (:class:`RunAgent`), and the defaults of an agent
whose policy is an actor-critic network (:class:`NetworkAgent`: IMPALA, A2C, A3C, ACER).

The driver (:mod:`~tfagents_vtrace.runtime.driver`) owns a run's life; an agent supplies only
these members, so the agents depend on the runtime and never the other way round.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from tfagents_vtrace.runtime.config import stream_seed
from tfagents_vtrace.runtime.rundir.counters import Counters


class RunAgent(Protocol):
    """What the driver calls, and nothing else.

    * ``checkpoint_items()``: trackables to checkpoint; a ``network`` entry is required.
    * ``extra_state``: None, or state with ``save(path)``, ``load(path)`` and ``len()`` (a
      replay) archived *before* each checkpoint and loaded *after* it.
    * ``start(counters)``: starts acting from the restored counters (it counts into them);
      ``advance()``: runs one iteration and returns the learner's metrics (may be empty);
      ``close()``: stops acting (threads joined, environments closed), the learner stays.
    * ``get_weights()`` / ``set_weights(weights)``: the policy's weights out and in, under
      ``lock`` (held while the driver checkpoints too: asynchronous workers update under it).
    * ``evaluation_policy()``: a greedy policy with ``set_weights`` (``runtime.evaluation``).
    * ``export(path)``: writes the policy's SavedModel to ``path``, replacing one there.
    * ``row_fields(times)``: fields the agent adds to a row; ``times`` holds the row's
      ``interval`` and ``eval`` seconds, None for the final row.
    * ``max_nonfinite_updates``: non-finite updates in a row that stop the run.
    """

    lock: contextlib.AbstractContextManager
    extra_state: object | None
    max_nonfinite_updates: int

    def checkpoint_items(self) -> dict: ...
    def start(self, counters: Counters) -> None: ...
    def advance(self) -> dict: ...
    def close(self) -> None: ...
    def get_weights(self) -> list: ...
    def set_weights(self, weights: list) -> None: ...
    def evaluation_policy(self): ...
    def export(self, path: str) -> None: ...
    def row_fields(self, times: dict | None) -> dict: ...


class NetworkAgent:
    """Defaults of a :class:`RunAgent` whose policy is the actor-critic network of its
    ``learner`` (``network``, ``get_weights()``, ``checkpoint_items()``), set by the
    subclass; ``source`` is what acts (an unroll source, a worker pool or an actor), which
    :meth:`advance` advances and :meth:`close` closes. ``env_factory``: ``(num_envs, seed)
    -> VectorEnv`` of the actors (None: ``make_vector_env``)."""

    extra_state = None
    lock = contextlib.nullcontext()
    source = None

    def __init__(self, run, config, network_config, env_factory=None):
        self.run_config, self.config, self.network_config = run, config, network_config
        self.env_factory = env_factory
        self.max_nonfinite_updates = getattr(config, "max_nonfinite_updates", 10)

    def checkpoint_items(self) -> dict:
        return self.learner.checkpoint_items()

    def actor_spec(self, unroll_length: int, restart: int, offset: int = 0):
        """The :class:`~tfagents_vtrace.runtime.acting.actor.ActorSpec` of the run's ``num_envs``
        environments acting ``unroll_length`` steps per unroll, seeded by the run's seed, the
        counter the run restarted at (``restart``: a resumed run does not replay the same
        episodes) and the actor's ``offset``."""
        from tfagents_vtrace.runtime.acting.actor import ActorSpec

        run = self.run_config
        seed = stream_seed(run.seed, restart) + offset
        return ActorSpec(
            run.env_id, self.network_config, run.num_envs, unroll_length, seed=seed,
            env_mode=run.env_mode, policy_impl=run.policy_impl, env_kwargs=run.env_kwargs,
            env_step_timeout_s=run.env_step_timeout_s, env_groups=run.env_groups,
        )  # fmt: skip

    def actor_env_factory(self):
        """``seed -> VectorEnv`` of ``env_factory`` for one actor's environment group (None
        without one)."""
        from tfagents_vtrace.runtime.acting.actor import group_size

        factory, num_envs = self.env_factory, group_size(self.run_config)
        return None if factory is None else lambda seed: factory(num_envs, seed)

    def start_workers(self, workers: list, steps: int, start: int) -> None:
        """``workers`` (``iterate()``, ``close()``) on a started
        :class:`~tfagents_vtrace.runtime.acting.workers.WorkerPool` as ``source``; an iteration is
        ``steps`` environment steps, the run restarted at step ``start``."""
        from tfagents_vtrace.runtime.acting.workers import WorkerPool

        run = self.run_config
        self.source = WorkerPool(workers, steps, start, run.total_steps, run.deterministic)
        self.source.start()

    def advance(self) -> dict:
        return self.source.advance()

    def close(self) -> None:
        if self.source is not None:
            self.source.close()

    def build_network(self):
        """A new network of the run's config for its environment's spaces."""
        from tfagents_vtrace.runtime.acting.actor import build_network

        run = self.run_config
        return build_network(self.network_config, run.env_id, run.env_kwargs)

    def acting_network(self, impl: str | None = None):
        """The learner's network when a numpy policy alone will act under ``impl`` (default:
        the run's ``policy_impl``; it only copies weights out of it), else a fresh copy (TF
        policies, and "fastest"'s TF candidates, own one)."""
        from tfagents_vtrace.runtime.acting.policies import numpy_policy_class

        impl = impl or self.run_config.policy_impl
        if impl != "fastest" and numpy_policy_class(self.learner.network, impl) is not None:
            return self.learner.network
        return self.build_network()

    def get_weights(self) -> list:
        return self.learner.get_weights()

    def set_weights(self, weights: list) -> None:
        self.learner.network.set_weights(weights)

    def evaluation_policy(self):
        from tfagents_vtrace.runtime.acting.policies import make_policy, numpy_policy_class

        impl = self.run_config.policy_impl
        if impl == "fastest":  # evaluations play few environments: numpy where it applies
            impl = "numpy" if numpy_policy_class(self.learner.network, impl) else "auto"
        return make_policy(self.acting_network(impl), impl, greedy=True)

    def export(self, path: str) -> None:
        from tfagents_vtrace.export.saved_model import export_policy

        export_policy(self.learner.network, path, overwrite=True)

    def row_fields(self, times: dict | None) -> dict:
        return {}


def update_statistics(network, returns, unrolls) -> None:
    """Merges fresh unrolls (``(unroll, source)`` pairs: ``source`` the actor or worker whose
    columns they are) into the running statistics of ``normalize_observations`` (the
    network's, published with its weights) and of ``normalize_rewards`` (``returns``, a
    :class:`~tfagents_vtrace.networks.normalization.ReturnScaler`, or None): what the actors
    saw, each observation once (entry ``T`` of an unroll is entry 0 of the next)."""
    import numpy as np
    import tensorflow as tf

    if not unrolls:
        return
    if getattr(network, "observation_normalizers", None):
        fresh = [tf.nest.map_structure(lambda x: x[:-1], u["observation"]) for u, _ in unrolls]
        network.update_observation_statistics(
            tf.nest.map_structure(lambda *x: np.concatenate(x, 1), *fresh)
        )
    if returns is not None:
        returns.update((u["reward"], u["first"][:-1], source) for u, source in unrolls)
