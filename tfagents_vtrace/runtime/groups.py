"""A game whose agents form several groups (:mod:`tfagents_vtrace.envs.multi_agent`): one
run agent per group, each with its own network, learner, actors, checkpoint entries and
export, their actors stepping the same games.

:class:`GroupsAgent` is the driver's one run agent (the ``RunAgent`` protocol). Group ``g``'s
agent is the spec's own (``spec.run_agent``) for a run of its columns only: ``num_envs`` =
games x agents of ``g``, ``total_steps`` its share of the run's (so that every group's
learning-rate schedule ends with the run), and the environment's ``group`` keyword, so its
network is built for its spaces. Each group's actor ``k`` steps group ``g``'s columns of the
same :class:`~tfagents_vtrace.envs.multi_agent.GameHub`: the actors of all groups meet at
each step (one thread per group), so the games move on when every group has acted.
Actors of the same index make their environments with the same seed, which names their hub.

An :meth:`advance` updates every group once, in turn. Rows name each group's learner
metrics ``<group>/<metric>``; checkpoints hold each group's entries under
``<group>__<entry>`` (the first group's network also as ``network``); the export writes
``DIR/policy/<group>/``, each a policy of its own. Evaluations play whole games
(:class:`~tfagents_vtrace.envs.multi_agent.JointVectorEnv`), each group acting with its own
greedy policy (:class:`JointPolicy`).

Each group acts from its own thread(s): ``num_actors=0`` (the inline actor) acts with one
thread per group. With ``backend="ray"`` each of the ``num_actors`` Ray actor processes steps
whole games instead, with one actor per group inside it
(:mod:`~tfagents_vtrace.runtime.acting.ray_games`): each of its results holds every group's
unroll of the same steps, and each group's learner takes its own. A failing game cannot be
made again for one group alone: it ends the run (with a checkpoint) as an environment past
its restart limits does. Not with asynchronous workers (A3C, ACER), replay, ``env_groups``
or a warm start.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import re
import threading

import numpy as np

from tfagents_vtrace.envs import env_spaces, multi_agent

HUB_TIMEOUT_S = 600.0
"""Seconds a group's actor waits for the other groups' at a step before the run fails."""


def is_group_run(run) -> bool:
    """Whether ``run``'s environment is a game with more than one group, or with groups
    given (``agent_groups``)."""
    groups = multi_agent.game_groups(run.env_id, run.env_kwargs)
    return groups is not None and (len(groups) > 1 or "agent_groups" in run.env_kwargs)


def check_group_run(run) -> None:
    """Raises ``ValueError`` naming the setting for what a run of several groups does not
    do (module docstring); nothing for other runs."""
    if not is_group_run(run):
        return
    if run.env_groups != 1:
        raise ValueError("env_groups: a game of several groups steps its games whole (1)")
    if run.init_from:
        raise ValueError("init_from: not for a game of several groups")


def _key(name: str) -> str:
    return re.sub(r"\W", "_", name)


class JointPolicy:
    """Every group's greedy policy over a :class:`JointVectorEnv`'s ``{group: [B_g, ...]}``
    observations; weights are the groups' lists one after the other."""

    def __init__(self, policies: dict, sizes: dict, counts: dict, spaces: dict):
        self.policies, self.sizes, self.counts, self.spaces = policies, sizes, counts, spaces

    def initial_state(self, batch_size: int) -> dict:
        return {g: p.initial_state(self.counts[g] * batch_size // sum(self.counts.values()))
                for g, p in self.policies.items()}  # fmt: skip

    def set_weights(self, weights: list) -> None:
        start = 0
        for g, policy in self.policies.items():
            policy.set_weights(weights[start : start + self.sizes[g]])
            start += self.sizes[g]

    def step(self, obs, first, prev_action, prev_reward, state):
        actions, infos, states, start = {}, {}, {}, 0
        for g, policy in self.policies.items():
            n = len(obs[g]) if not isinstance(obs[g], dict) else len(next(iter(obs[g].values())))
            cols = slice(start, start + n)
            start += n
            if prev_action is None:  # the first step: no previous action
                space = self.spaces[g]
                previous = np.zeros((n, *space.shape), space.dtype)
            else:
                previous = np.asarray(prev_action[g])
            actions[g], infos[g], states[g] = policy.step(
                obs[g], first[cols], previous, prev_reward[cols], state[g]
            )
        return actions, infos, states


class _Locks:
    """A context holding every lock of ``locks`` (taken in order, released in reverse)."""

    def __init__(self, locks: list):
        self.locks, self._stack = locks, None

    def __enter__(self) -> _Locks:
        stack = contextlib.ExitStack()
        for lock in self.locks:
            stack.enter_context(lock)
        self._stack = stack
        return self

    def __exit__(self, *exc) -> None:
        stack, self._stack = self._stack, None
        stack.close()


class GroupsAgent:
    """The run agent of a game of several groups (module docstring)."""

    def __init__(self, run, spec, agent_config, network_config, strategy=None, env_factory=None):
        if env_factory is not None:
            raise ValueError("env_factory: not for a game of several groups")
        self.run_config = run
        kwargs = {k: v for k, v in run.env_kwargs.items() if k != "group"}
        self.groups = multi_agent.game_groups(run.env_id, kwargs)
        agents = sum(len(a) for a in self.groups.values())
        self.num_games = run.num_envs // agents
        self.hubs = multi_agent.GameHubs(
            run.env_id, self.num_games, HUB_TIMEOUT_S,
            hub_kwargs={"agent_ids": kwargs.get("agent_ids", False),
                        "groups": kwargs.get("agent_groups")},
            game_kwargs={k: v for k, v in kwargs.items()
                         if k not in ("agent_ids", "agent_groups")},
        )  # fmt: skip
        self.agents, self.action_spaces = {}, {}
        for name, members in self.groups.items():
            columns = self.num_games * len(members)
            group_run = dataclasses.replace(
                run,
                num_envs=columns,
                # a thread per group meets the others (Ray: in each actor process)
                num_actors=run.num_actors if run.backend == "ray" else max(1, run.num_actors),
                env_kwargs={**kwargs, "group": name},
                total_steps=max(1, math.ceil(run.total_steps * columns / run.num_envs)),
            )
            config = spec.network_config(
                network_config, agent_config, group_run.env_id, group_run.env_kwargs
            )
            agent = spec.run_agent(group_run, agent_config, config, strategy=strategy,
                                   env_factory=self._factory(name))  # fmt: skip
            if agent.extra_state is not None:
                raise ValueError(f"{spec.name}: its replay is not for a game of several groups")
            if run.backend == "ray" and not hasattr(agent, "actors_spec"):
                raise ValueError(f"backend: {spec.name} trains a game of several groups locally")
            self.agents[name] = agent
            self.action_spaces[name] = env_spaces(group_run.env_id, group_run.env_kwargs).action
        first = next(iter(self.agents.values()))
        self.extra_state = None
        self.max_nonfinite_updates = first.max_nonfinite_updates

    # -- the games the groups' actors share ---------------------------------------------
    def _factory(self, name: str):
        return lambda num_envs, seed: self.hubs.vector(name, seed)

    # -- the RunAgent protocol ----------------------------------------------------------
    @property
    def lock(self) -> _Locks:
        """Every group's lock, taken in the groups' order (``with agent.lock:``)."""
        return _Locks([agent.lock for agent in self.agents.values()])

    def checkpoint_items(self) -> dict:
        items = {}
        for name, agent in self.agents.items():
            for key, value in agent.checkpoint_items().items():
                items[f"{_key(name)}__{key}"] = value
        items["network"] = next(iter(self.agents.values())).checkpoint_items()["network"]
        return items

    def start(self, counters) -> None:
        if self.run_config.backend != "ray":
            for agent in self.agents.values():
                agent.start(counters)
            return
        from tfagents_vtrace.runtime.acting.actor import WeightStore
        from tfagents_vtrace.runtime.acting.ray_games import GameActorPool
        from tfagents_vtrace.runtime.acting.unroll_sources import GroupSource, SplitQueue

        run = self.run_config
        specs = {name: agent.actors_spec(counters) for name, agent in self.agents.items()}
        stores = {name: WeightStore() for name in self.agents}
        split, stop = SplitQueue(self.agents, run.queue_capacity), threading.Event()
        pool = GameActorPool(specs, self.hubs, run.num_actors, stores, split, stop,
                             counters=counters, address=run.ray_address,
                             actor_cpus=run.ray_actor_cpus)  # fmt: skip
        for name, agent in self.agents.items():  # each publishes its first weights
            agent.start(counters, source=GroupSource(pool, split, name, stores[name], stop))
        pool.start()  # Ray's processes built, then driven from the pool's thread

    def advance(self) -> dict:
        metrics, streak = {}, 0
        for name, agent in self.agents.items():
            for key, value in (agent.advance() or {}).items():
                if key == "nonfinite_streak":  # the driver's, over every group
                    streak = max(streak, int(value))
                else:
                    metrics[f"{name}/{key}"] = value
        return {**metrics, "nonfinite_streak": streak} if metrics else {}

    def close(self) -> None:
        self.hubs.abort()  # an actor waiting for another group's step is let go
        for agent in self.agents.values():
            agent.close()
        self.hubs.clear()

    def get_weights(self) -> list:
        return [w for agent in self.agents.values() for w in agent.get_weights()]

    def set_weights(self, weights: list) -> None:
        start = 0
        for agent in self.agents.values():
            n = len(agent.get_weights())
            agent.set_weights(weights[start : start + n])
            start += n

    def evaluation_policy(self) -> JointPolicy:
        policies = {name: agent.evaluation_policy() for name, agent in self.agents.items()}
        sizes = {name: len(agent.get_weights()) for name, agent in self.agents.items()}
        counts = {name: len(members) for name, members in self.groups.items()}
        return JointPolicy(policies, sizes, counts, self.action_spaces)

    def export(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)
        for name, agent in self.agents.items():
            agent.export(os.path.join(path, name))

    def row_fields(self, times: dict | None) -> dict:
        fields = {}
        for name, agent in self.agents.items():
            for key, value in agent.row_fields(times).items():
                fields[key if len(self.agents) == 1 else f"{name}/{key}"] = value
        return fields
