"""The actor-learner agent (IMPALA, A2C): unrolls from a source, one compiled update each.

IMPALA's decoupled acting and learning (Espeholt et al. 2018,
https://arxiv.org/abs/1802.01561) as a :class:`~tfagents_vtrace.runtime.driver.RunAgent`:
each :meth:`ActorLearner.advance` takes ``batch_unrolls`` unrolls from an unroll source
(actor threads, Ray actors or the inline actor: :mod:`~tfagents_vtrace.runtime.
unroll_sources`), mixes in replayed ones (IMPALA's ``replay_ratio``:
:class:`~tfagents_vtrace.replay.unrolls.UnrollReplay`), runs the registry ``Learner``'s
compiled train step on them, concatenated along B, and publishes the new weights. Rows add
where the wall time went (:mod:`~tfagents_vtrace.runtime.acting.time_shares`).

An agent that supplies only a ``Learner`` gives ``actor_learner(Learner)`` as its spec's
``run_agent``.
"""

from __future__ import annotations

import dataclasses
import math
import time

from tfagents_vtrace.envs.turn_games import set_snapshot_source
from tfagents_vtrace.networks.normalization import ReturnScaler
from tfagents_vtrace.replay.unrolls import UnrollReplay, replayed_per_batch
from tfagents_vtrace.runtime import strategy as strategy_lib
from tfagents_vtrace.runtime.acting.time_shares import TimeShares
from tfagents_vtrace.runtime.acting.unroll_sources import (
    acting_spec,
    stack_unrolls,
    unroll_source,
)
from tfagents_vtrace.runtime.config import stream_seed
from tfagents_vtrace.runtime.run_agent import NetworkAgent, update_statistics
from tfagents_vtrace.runtime.self_play import (
    SelfPlaySpec,
    SnapshotOpponents,
    SnapshotPool,
    fixed_opponents,
    is_self_play,
    snapshot_policies,
)


@dataclasses.dataclass(frozen=True)
class actor_learner:  # noqa: N801 - used as a function: run_agent=actor_learner(Learner)
    """The ``run_agent`` of an agent whose ``Learner`` is fed by actors: called as the
    driver calls every agent's ``run_agent``, it returns the :class:`ActorLearner` of
    ``Learner``.

    ``Learner(config, network_factory, strategy, total_updates, seed=)`` has ``network``,
    ``train_step(batch) -> metrics``, ``get_weights()`` and ``checkpoint_items()``
    (:mod:`tfagents_vtrace.agents.replicated_learner` is the skeleton IMPALA and A2C share).
    """

    Learner: type

    def __call__(self, run, agent_config, network_config, **kwargs) -> ActorLearner:
        return ActorLearner(run, self.Learner, agent_config, network_config, **kwargs)


class ActorLearner(NetworkAgent):
    """The run agent of ``learner_class`` (a ``Learner``) fed by actors (module docstring);
    ``strategy`` is the learner's (the default one when None), ``env_factory``
    (``(num_envs, seed) -> VectorEnv``) the actors'."""

    def __init__(
        self, run, learner_class, agent_config, network_config, strategy=None, env_factory=None
    ):
        if run.backend == "ray":  # ImportError without Ray, ValueError for num_actors=0
            from tfagents_vtrace.runtime.acting import ray_backend

            ray_backend.check_run_config(run)
        super().__init__(run, agent_config, network_config, env_factory)
        self.seed_offset = strategy_lib.worker_role(strategy).seed_offset
        updates = math.ceil(run.total_steps / run.steps_per_update)
        self.learner = learner_class(
            agent_config, self.build_network, strategy, updates, seed=run.seed
        )
        self.returns = None  # normalize_rewards: the discounted return's statistics
        if getattr(agent_config, "normalize_rewards", False):
            self.returns = ReturnScaler(agent_config.discount)
        self.replay = UnrollReplay(
            getattr(agent_config, "replay_unrolls", 0),
            replayed_per_batch(getattr(agent_config, "replay_ratio", 0.0), run.batch_unrolls),
            seed=stream_seed(run.seed, stream=1),
        )
        self.pool = None  # self-play: the snapshots the game's opponents play
        if is_self_play(run.env_id, run.env_kwargs):
            shapes = [w.shape for w in self.learner.get_weights()]
            self.pool = SnapshotPool(shapes, run.self_play_pool, run.self_play_latest)

    def checkpoint_items(self) -> dict:
        items = {**self.learner.checkpoint_items(), "network": self.learner.network}
        if self.returns is not None:
            items["return_statistics"] = self.returns.statistics
        if self.pool is not None:
            items["self_play"] = self.pool
        return items

    def _snapshot_opponents(self, counters) -> None:
        """Self-play: the pool's first snapshot (a new run's step 0), the opponents of this
        process's games (the actor threads', the evaluations'), and the step of the next
        snapshot."""
        if len(self.pool) == 0:
            self.pool.add(counters.env_steps, self.learner.get_weights())
        last = int(self.pool.steps.numpy().max())
        self._next_snapshot = last + self.run_config.self_play_every
        run = self.run_config
        fixed = fixed_opponents(run) if run.self_play_fixed else ()
        set_snapshot_source(
            SnapshotOpponents(
                self.pool, snapshot_policies(self.build_network), run.self_play_fixed, fixed
            )
        )

    def start(self, counters, source=None) -> None:
        """Starts acting: the run's unroll source, or ``source`` when given (the groups of a
        game whose Ray actors step whole games: :mod:`~tfagents_vtrace.runtime.groups`)."""
        run, self.counters = self.run_config, counters
        snapshots = None  # self-play: what Ray actors' processes play (runtime/self_play.py)
        if self.pool is not None:
            self._snapshot_opponents(counters)
            snapshots = (SelfPlaySpec.from_run(run, self.pool), self.pool)
        if source is not None and snapshots is not None:
            raise ValueError("self_play: not for a game of several groups")
        if source is None:
            spec = self.actors_spec(counters)
            source = unroll_source(
                run,
                spec,
                self.acting_network,
                self.env_factory,
                start=counters.updates,
                counters=counters,
                snapshots=snapshots,
            )
        self.source = source
        self.times = TimeShares(0 if self.source.inline else run.num_actors)
        self.source.start(counters.updates, self.learner.get_weights())

    def actors_spec(self, counters):
        """The ``ActorSpec`` of this run's actors, from the update count of ``counters``."""
        run = self.run_config
        return acting_spec(run, self.actor_spec(run.unroll_length, counters.updates,
                                                self.seed_offset))  # fmt: skip

    def advance(self) -> dict:
        """One update on ``batch_unrolls`` fresh unrolls (and replayed ones), published."""
        run, counters = self.run_config, self.counters
        start = time.perf_counter()
        items = [self.source.next() for _ in range(run.batch_unrolls)]
        received = time.perf_counter()
        for _, info in items:
            counters.add(info=info, lag=counters.updates - info["weights_version"])
        self._update_statistics(items)
        batch = stack_unrolls(self.replay.mix([u for u, _ in items]))
        if self.returns is not None:  # replayed unrolls keep their raw rewards: scaled now
            batch = {**batch, "reward": self.returns.scale(batch["reward"])}
        metrics = self.learner.train_step(batch)
        trained = time.perf_counter()
        counters.add(steps=run.steps_per_update, updates=1)
        self.source.publish(counters.updates, self.learner.get_weights())
        if self.pool is not None and counters.env_steps >= self._next_snapshot:
            self.pool.add(counters.env_steps, self.learner.get_weights())
            self._next_snapshot = counters.env_steps + run.self_play_every
        infos = [info for _, info in items]
        self.times.add_update(infos, start, received, trained, time.perf_counter())
        return metrics

    def _update_statistics(self, items) -> None:
        """The fresh unrolls (not the replayed ones) into the running statistics, before the
        update that trains on them (:func:`~tfagents_vtrace.runtime.run_agent.
        update_statistics`)."""
        update_statistics(
            self.learner.network, self.returns, [(u, info["actor_id"]) for u, info in items]
        )

    def row_fields(self, times: dict | None) -> dict:
        fields = {} if times is None else self.times.fields(times["interval"], times["eval"])
        if self.pool is not None:
            fields["self_play_snapshots"] = len(self.pool)
        return fields
