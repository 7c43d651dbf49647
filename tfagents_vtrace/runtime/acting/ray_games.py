"""Ray actors that step whole games of several groups of agents, one learner per group.

A game whose agents form several groups (:mod:`tfagents_vtrace.runtime.groups`) cannot be
split between processes: every group's agents act in the same games at each step. So each
Ray actor process (:class:`GameHost`) steps whole games: it holds one
:class:`~tfagents_vtrace.runtime.acting.actor.Actor` per group over the same games (a
:class:`~tfagents_vtrace.envs.multi_agent.GameHubs` of its own, the groups' actors meeting
at each step from one thread each, as actor threads do in the learner's process), and one
``unroll()`` call returns every group's unroll of the same steps, ``{group: (unroll,
info)}``.

:class:`GameActorPool` is :class:`~tfagents_vtrace.runtime.acting.ray_backend.RayActorPool`
with these hosts: weights go by version for each group (one ``ray.put`` per group's
version), and each result goes whole into a :class:`~tfagents_vtrace.runtime.acting.
unroll_sources.SplitQueue`, from which each group's learner takes its own share
(:class:`~tfagents_vtrace.runtime.acting.unroll_sources.GroupSource`). A dead process is
replaced with new games, as a Ray actor's is; a game that raises ends the run with a
checkpoint, as it does on actor threads (the groups' vectors cannot be made again one by
one).
"""

from __future__ import annotations

import concurrent.futures
import threading

from tfagents_vtrace.envs.multi_agent import GameHubBroken
from tfagents_vtrace.runtime.acting.frames import unpack_unroll
from tfagents_vtrace.runtime.acting.ray_backend import (
    HostProcess,
    RayActorPool,
    import_ray,
    load_weights,
    put_until_stopped,
)


class GameHost(HostProcess):
    """The body of one Ray actor of a game of several groups (module docstring).

    Args:
      specs: ``{group: ActorSpec}`` of the groups' actors, in the game's order of groups.
      actor_id: seeds and identifies the actor (the same for every group: the groups'
        actors make their environments with the same seed, which names their games).
      hubs: the picklable :class:`~tfagents_vtrace.envs.multi_agent.GameHubs` of the
        run's games; its ``env_id`` carries a user's own game to this process.
      env_restarts: restart count to continue from.
      tf_threads: TensorFlow intra/inter-op threads in this process.
    """

    def __init__(self, specs: dict, actor_id: int, hubs, env_restarts: int = 0,
                 tf_threads: int = 1):  # fmt: skip
        super().__init__(tf_threads)
        from tfagents_vtrace.runtime.acting.actor import Actor

        self.hubs = hubs
        self.actors = {
            name: Actor(spec, actor_id, None, self._maker(name), env_restarts=int(env_restarts))
            for name, spec in specs.items()
        }
        self._threads = concurrent.futures.ThreadPoolExecutor(
            len(self.actors), thread_name_prefix="group"
        )

    def _maker(self, name: str):
        return lambda seed: self.hubs.vector(name, seed)

    def unroll(self, weights: dict) -> dict:
        """Loads each group's weights (``{group: (version, [ObjectRef])}``) where newer than
        its actor's, then runs one unroll of every group together, each from its own thread.
        Returns ``{group: (unroll, info)}``; raises the first group's error (the others'
        waits broken) if one raised."""
        for name, (version, ref) in weights.items():
            load_weights(self.actors[name], version, ref)
        calls = {name: self._threads.submit(actor.unroll) for name, actor in self.actors.items()}
        done, _ = concurrent.futures.wait(
            calls.values(), return_when=concurrent.futures.FIRST_EXCEPTION
        )
        if any(call.exception() is not None for call in done):
            self.hubs.abort()  # the groups still waiting for this one's step are let go
            concurrent.futures.wait(calls.values())
            errors = [call.exception() for call in calls.values() if call.exception()]
            # a group's own error before the others' waits that broke with no cause
            causes = [e for e in errors if not isinstance(e, GameHubBroken) or e.__cause__]
            raise (causes or errors)[0]
        return {name: call.result() for name, call in calls.items()}


class GameActorPool(RayActorPool):
    """``num_actors`` :class:`GameHost` processes driven by one learner-side thread.

    Args:
      specs: ``{group: ActorSpec}`` (:class:`GameHost`).
      hubs: the run's :class:`~tfagents_vtrace.envs.multi_agent.GameHubs`.
      stores: ``{group: WeightStore}`` of the groups' learners.
      out: the :class:`~tfagents_vtrace.runtime.acting.unroll_sources.SplitQueue` of the
        groups' results.
      stop, counters, address, actor_cpus: as :class:`RayActorPool`'s.
    """

    host_class = GameHost

    def __init__(self, specs: dict, hubs, num_actors: int, stores: dict, out,
                 stop: threading.Event, *, counters=None, address: str | None = None,
                 actor_cpus: float = 1.0):  # fmt: skip
        first = next(iter(specs.values()))
        super().__init__(first, num_actors, None, out, stop, counters=counters,
                         address=address, actor_cpus=actor_cpus)  # fmt: skip
        self.specs, self.hubs, self.stores = dict(specs), hubs, dict(stores)
        self._refs: dict = {}  # group -> (version, [ObjectRef]): one ray.put per version

    def host_args(self, actor_id: int) -> tuple:
        return (self.specs, actor_id, self.hubs)

    def _group_weights(self, name: str) -> tuple[int, list]:
        store = self.stores[name]
        held = self._refs.get(name)
        if held is None or held[0] != store.version:
            version, weights = store.get()
            held = self._refs[name] = (version, [import_ray().put(weights)])
        return held

    def _submit(self, actor_id: int):
        weights = {name: self._group_weights(name) for name in self.specs}
        return self.handles[actor_id].unroll.remote(weights)

    def _deliver(self, actor_id: int, item: dict) -> bool:
        infos = [info for _, info in item.values()]
        self._env_restarts[actor_id] = max(int(info["env_restarts"]) for info in infos)
        item = {name: (unpack_unroll(unroll), info) for name, (unroll, info) in item.items()}
        return put_until_stopped(self.out, item, self.stop)
