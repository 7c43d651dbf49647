"""Actors: a vector environment, a batched policy, and unrolls with one-step overlap.

The IMPALA actor (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) steps its
environments with a (possibly stale) copy of the learner's policy and ships fixed-length
unrolls. Everything an actor needs is built from picklable pieces (:class:`ActorSpec`: env
id, network config, seeds), and it exchanges plain numpy nests only, so the same class can
be hosted by a thread (local backend) or a remote worker later.

Unroll layout (``T = unroll_length``, ``B = num_envs``), NEXT_STEP autoreset semantics:

* ``observation, first, reset, prev_action, prev_reward``: ``[T+1, B, ...]``. Entry ``T``
  is entry 0 of the next unroll (the overlap that gives the bootstrap value). A Dict / Tuple
  observation is a dict / tuple of such arrays, one per sub-space.
* ``action, reward, terminated, truncated``: ``[T, B]``; ``policy``: behaviour parameters
  ``[T, B, ...]``; ``state``: recurrent state before entry 0, ``[B, k]`` each.

``reset_t`` marks a *reset step*: ``observation_t`` is the final observation of an episode
that ended at ``t - 1``; the env ignores ``action_t`` and returns ``reward_t = 0`` and the
first observation of the next episode, so ``first_{t+1} = reset_t``. ``prev_action`` and
``prev_reward`` are zero where ``first``.

Environment groups (``ActorSpec.env_groups`` G, ``--env_groups``): the actor's ``B``
environments are G vector environments of ``B / G`` each, whose columns follow one another
in the unroll (group g holds columns ``g B/G .. (g+1) B/G - 1``), each with its own seed and
carry. Their steps take turns: group g's step ``t + 1`` (its inputs stored, the policy
called on its ``B / G`` observations, the action sent) starts as soon as its step ``t``
ends, and with G > 1 the environment call runs in a helper thread, so that while one
group's environments step, the policy acts for the next group. With G = 1 every step runs
in the actor's thread, one after the other. The unroll's layout is the same either way.

Each unroll's ``info`` also says where the actor's time went (``time.perf_counter``
seconds since the previous info): ``inference_time`` (policy steps and their inputs),
``env_time`` (``env.step`` and the bookkeeping of its outcome, environment recreation
and packing the frames of an unroll to ship included) and ``weights_time`` (loading
published weights).

An actor whose spec says ``ship_frames_once`` returns its unrolls with a stacked-frame
observation packed, each frame once (:mod:`~tfagents_vtrace.runtime.acting.frames`), for
the learner to unpack.

Failing environments (:mod:`tfagents_vtrace.envs.failures`) never cost the unroll:

* a sub-environment of a resilient sync vector that fails is made again by the vector
  alone, which reports the column in the step's ``info["env_failed"]``;
* a vector whose step raises (or returns a non-finite result) is made again whole, with a
  new seed, and every column counts as failed at that step.

A failed column ``i`` at step ``t`` has its episode cut there: step ``t`` becomes a reset
step (``reset_t = True``: its action never acted, the learner masks it), the episode
truncated at ``t - 1`` (``truncated_{t-1} = True``, so the learner bootstraps from
``observation_t``, the last one the environment returned, and never across the failure;
at ``t = 0`` that step belongs to the previous unroll, which already bootstrapped from it),
and ``observation_{t+1}`` is the new environment's first (``first_{t+1} = True``). A column
already in a reset step at ``t`` needs no mark, and one whose episode began at ``t`` has no
step to truncate. Cut episodes are not reported in
``episode_returns``. Restarts are counted in ``env_restarts`` and limited by
:class:`~tfagents_vtrace.envs.failures.RestartPolicy` (past it:
:class:`~tfagents_vtrace.envs.failures.EnvFailure`); an action outside the action
space stops the run with ``InvalidAction``, and an ``action_mask`` observation entry that
allows no action where the environment will take one (not at a reset step) with
``NoActionAllowed``, checked before the policy is called
(:mod:`tfagents_vtrace.networks.action_masks`). A ``Box`` action goes to ``env.step`` clipped to
the space's bounds (:func:`~tfagents_vtrace.envs.env_action`); the unroll's ``action`` and
``prev_action`` hold the policy's unclipped draw, whose log-probability the learner scores.

For the step timeout the actor stamps ``env_call_since`` (``time.perf_counter()``) before
each environment call and clears it after, for the
:class:`~tfagents_vtrace.envs.failures.Watchdog` of whoever runs the actor; an actor
that was ``abandoned`` meanwhile raises
:class:`~tfagents_vtrace.envs.failures.ActorAbandoned` as soon as its call returns.
"""

from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import tensorflow as tf

from tfagents_vtrace.envs.factory import env_action
from tfagents_vtrace.envs.failures import (
    ActingError,
    ActorAbandoned,
    EnvFailure,
    NoActionAllowed,
    RestartPolicy,
    step_timeout,
    timeout_message,
    watchdog,
)
from tfagents_vtrace.envs.multi_agent import INACTIVE
from tfagents_vtrace.networks.action_masks import MASK_KEY, first_all_masked, mask_blocks
from tfagents_vtrace.runtime.acting.frames import pack_unroll
from tfagents_vtrace.runtime.acting.policies import make_policy
from tfagents_vtrace.runtime.acting.space_checks import (
    check_actions,
    check_env_output,
    observation_leaves,
)
from tfagents_vtrace.runtime.rundir.stop_signals import stop_inline

log = logging.getLogger(__name__)

TIMES = ("env_time", "inference_time", "weights_time")
"""Seconds an actor reports in each unroll's info (see module docstring)."""
GROUP_SEED_STRIDE = 500_009
"""Seed offset of each environment group past the first (group 0 keeps the actor's seed)."""


@dataclasses.dataclass(frozen=True)
class ActorSpec:
    """Picklable description of an actor."""

    env_id: str
    """gymnasium id (``tfagents_vtrace.envs`` ids included)."""
    network_config: object
    """The ``NetworkConfig`` of the learner's network."""
    num_envs: int = 32
    """Environments stepped together (B of each unroll)."""
    unroll_length: int = 20
    """T: steps per unroll."""
    seed: int = 0
    """Base seed of the environments and of action sampling."""
    env_mode: str = "auto"
    """``make_vector_env`` mode."""
    policy_impl: str = "auto"
    """"auto" | "tf" | "numpy" | "fastest" (see :mod:`tfagents_vtrace.runtime.acting.policies`)."""
    env_kwargs: dict = dataclasses.field(default_factory=dict)
    """Environment constructor arguments (``RunConfig.env_kwargs``)."""
    env_step_timeout_s: float | None = None
    """Seconds an environment call may take (``RunConfig.env_step_timeout_s``; None or 0:
    no limit): the limit of the watchdog of whoever runs the actor, and of async vectors'
    own waits."""
    env_groups: int = 1
    """Vector environments of ``num_envs / env_groups`` each, stepped in turn so that one
    group's environments step while the policy acts for another (module docstring)."""
    ship_frames_once: bool = False
    """Unrolls leave :meth:`Actor.unroll` with a stacked-frame observation packed, each frame
    once (:func:`~tfagents_vtrace.runtime.acting.frames.pack_unroll`): set for actors that
    ship them to a learner, which unpacks them."""

    def __post_init__(self):
        if self.env_groups < 1 or self.num_envs % self.env_groups:
            raise ValueError(
                f"env_groups: expected a divisor of num_envs ({self.num_envs}), received "
                f"{self.env_groups}"
            )


def default_env_factory(spec: ActorSpec) -> Callable[[int], object]:
    """``seed -> VectorEnv`` of one of ``spec``'s environment groups (``num_envs /
    env_groups`` environments) using ``tfagents_vtrace.envs.make_vector_env``."""

    from tfagents_vtrace.envs.factory import vector_env_factory

    make = vector_env_factory(spec.env_id, spec.env_mode, spec.env_kwargs,
                              step_timeout(spec.env_step_timeout_s))  # fmt: skip
    return lambda seed: make(group_size(spec), seed)


def group_size(spec) -> int:
    """Environments per group of an :class:`ActorSpec` or a ``RunConfig``: what an actor's
    ``env_factory`` makes per call."""
    return spec.num_envs // getattr(spec, "env_groups", 1)


def build_network(network_config, env_id: str, env_kwargs: dict | None = None):
    """The network for the spaces of ``env_id`` made with ``env_kwargs``
    (:func:`~tfagents_vtrace.envs.env_spaces`)."""
    from tfagents_vtrace.envs import env_spaces
    from tfagents_vtrace.networks import make_network

    spaces = env_spaces(env_id, env_kwargs)
    return make_network(network_config, spaces.observation, spaces.action)


def _inactive(info: dict | None, cols: slice) -> np.ndarray | None:
    """A vector's ``infos["tfv_inactive"]`` (:mod:`tfagents_vtrace.envs.multi_agent`) as bool
    ``[B/G]``, or None when it reports none.

    Raises:
      EnvFailure: for a report of another shape (the vector's bug: no column can be told
        active or not, and it would recur on every step).
    """
    if not info or INACTIVE not in info:
        return None
    value = np.asarray(info[INACTIVE], bool)
    columns = cols.stop - cols.start
    if value.shape != (columns,):
        raise EnvFailure(
            f"infos[{INACTIVE!r}]: expected one bool per column of the vector, shape "
            f"({columns},), received shape {value.shape}"
        )
    return value


class _Group:
    """One vector environment of an actor and its columns' carry (module docstring,
    "Environment groups"): the observation, flags, previous action / reward, recurrent
    state and episode statistics of columns ``cols`` of the unroll, and the step in flight."""

    def __init__(self, index: int, cols: slice, env):
        self.index, self.cols, self.env = index, cols, env
        self.since = 0.0  # perf_counter() while an environment call runs (0: none)
        self.pending = None  # the step in flight: a Future, or a (result, error) pair
        self.check_output = not getattr(env, "checks_output", False)
        self.obs = None  # the observation of the step to come ([B/G, ...] or a nest)
        self.action = self.new_state = None  # the step in flight's action and next state


class Actor:
    """Steps ``spec.num_envs`` environments and returns unrolls (see module docstring).

    Args:
      spec: the :class:`ActorSpec`.
      actor_id: distinguishes the seeds of several actors.
      network: the actor's own network copy (built from the spec when None).
      env_factory: ``seed -> VectorEnv`` of ``spec.num_envs / spec.env_groups`` environments
        (default: ``make_vector_env``); called again with a new seed when a whole vector
        fails.
      env_restarts: the restart count to start from (seeds depend on it).
    """

    def __init__(
        self, spec: ActorSpec, actor_id: int = 0, network=None, env_factory=None, env_restarts=0
    ):
        self.spec = spec
        self.actor_id = int(actor_id)
        self._env_factory = env_factory or default_env_factory(spec)
        if network is None:
            network = build_network(spec.network_config, spec.env_id, spec.env_kwargs)
        # A replacement (a new thread or Ray actor process) continues its predecessor's
        # restart count, so its environments and action sampling draw new seeds.
        self._restarts_base = int(env_restarts)
        seed = self._seed(self._restarts_base)
        # the groups of a game of several groups share its seed (their games), not their draws
        group = spec.env_kwargs.get("group") if isinstance(spec.env_kwargs, dict) else None
        draws = 0 if group is None else zlib.crc32(str(group).encode()) % 1_000_003
        self.policy = make_policy(network, spec.policy_impl, seed=seed + 7 + draws,
                                  label=f"actor {self.actor_id}")  # fmt: skip
        self.weights_version = -1
        self.restarts = RestartPolicy()  # whole-vector failures: window, backoff, EnvFailure
        self.abandoned = False  # set by the owner after a timeout: the next return raises
        self.watched = False  # whether an owner watches the calls (else: the first unroll)
        self._unrolls = 0
        self._episode_returns: list[float] = []
        self._episode_lengths: list[int] = []
        # Seconds per TIMES key since the last unroll's info (a host may add its own).
        self.timing = dict.fromkeys(TIMES, 0.0)
        groups, per_group = spec.env_groups, spec.num_envs // spec.env_groups
        # Overlapped steps run in one helper thread (a group's env.step releases the GIL
        # while it steps in C: ALE, envpool, subprocess vectors); one group steps inline.
        self._stepper = ThreadPoolExecutor(1, f"actor-{actor_id}-env") if groups > 1 else None
        self._groups: list[_Group] = []
        for g in range(groups):
            cols = slice(g * per_group, (g + 1) * per_group)
            group = _Group(g, cols, None)
            self._groups.append(group)
            group.env = self._make_env(group, seed)
        self._start_episodes()

    def successor(self, network=None) -> Actor:
        """A new actor in this one's place (its environment hung): the same id, spec and
        environment factory, new environments and seeds (the restart count goes on)."""
        return Actor(self.spec, self.actor_id, network, self._env_factory,
                     env_restarts=self.env_restarts + 1)  # fmt: skip

    @property
    def env_restarts(self) -> int:
        """Environments made again so far: whole vectors and single sub-environments."""
        return self._restarts_base + sum(getattr(g.env, "restarts", 0) for g in self._groups)

    @property
    def env(self):
        """The first group's vector environment (the actor's only one with one group)."""
        return self._groups[0].env

    @property
    def env_call_since(self) -> float:
        """``time.perf_counter()`` when the oldest environment call in flight began (0.0:
        none): what the :class:`~tfagents_vtrace.envs.failures.Watchdog` reads."""
        return min((g.since for g in self._groups if g.since), default=0.0)

    @property
    def what(self) -> str:
        """``"actor I: environment ID"``, for messages."""
        return f"actor {self.actor_id}: environment {self.spec.env_id}"

    @property
    def timeout_s(self) -> float | None:
        """The step timeout (``spec.env_step_timeout_s``; None: none)."""
        return step_timeout(self.spec.env_step_timeout_s)

    def watch(self, on_timeout: Callable[[float], None] | None) -> None:
        """Has the process's :class:`~tfagents_vtrace.envs.failures.Watchdog` call
        ``on_timeout(elapsed_s)`` when an environment call exceeds :attr:`timeout_s`. None:
        the actor acts in a thread nobody can replace (the learner's), so a hung call stops
        the run (:func:`~tfagents_vtrace.runtime.rundir.stop_signals.stop_inline`); an actor no
        owner watches is watched so at its first unroll."""
        if on_timeout is None:
            what, limit = self.what, self.timeout_s  # not self: the watchdog holds it weakly

            def on_timeout(elapsed: float) -> None:
                stop_inline(timeout_message(what, elapsed, limit))

        watchdog().watch(self, self.timeout_s, on_timeout)
        self.watched = True

    def unwatch(self) -> None:
        watchdog().unwatch(self)

    def _seed(self, restart: int) -> int:
        return int(self.spec.seed) + 10_007 * self.actor_id + 1_000_003 * restart

    def _make_env(self, group: _Group, seed: int):
        """A new vector for ``group`` from the factory (a group past the first adds
        ``GROUP_SEED_STRIDE`` per group to ``seed``); a resilient one reports failed columns
        at once (the actor marks the cut) and names this actor in its messages."""
        group.since = time.perf_counter()
        env = self._env_factory(seed + GROUP_SEED_STRIDE * group.index)
        group.since = 0.0
        if hasattr(env, "cut_as_truncation"):
            env.cut_as_truncation = False
            env.label = self.what
        group.check_output = not getattr(env, "checks_output", False)
        return env

    def _start_episodes(self) -> None:
        """Resets every environment and the per-column carry (obs, flags, prev, state)."""
        b = self.spec.num_envs
        inactive = []
        for group in self._groups:
            group.since = time.perf_counter()
            group.obs, info = group.env.reset()
            group.since = 0.0
            inactive.append(_inactive(info, group.cols))
        env = self._groups[0].env
        space = self._action_space = env.single_action_space
        # None, or the action mask's blocks (its entries per action dimension)
        self._mask_blocks = mask_blocks(getattr(env, "single_observation_space", None), space)
        self._first = np.ones(b, bool)
        self._reset = np.zeros(b, bool)
        for group, absent in zip(self._groups, inactive):  # no first step for absent agents
            if absent is not None:
                self._reset[group.cols] = absent
        self._prev_action = np.zeros((b, *space.shape), space.dtype)
        self._prev_reward = np.zeros(b, np.float32)
        self._state = tuple(np.array(s) for s in self.policy.initial_state(b))  # written per group
        self._ep_return = np.zeros(b, np.float64)
        self._ep_length = np.zeros(b, np.int64)

    def _restart_env(self, group: _Group, error: BaseException, step: int):
        """Makes ``group``'s whole vector again after ``error`` at its step ``step``
        (:class:`RestartPolicy`: a backoff for failures in a row, :class:`EnvFailure` past
        the limits); returns the new vector's first observation (the caller updates the
        carry)."""
        remade_alone = getattr(group.env, "restart_error", None)
        if remade_alone is not None:  # a group's columns of games the other groups step too
            raise remade_alone(error) from error
        start = time.perf_counter()
        self._restarts_base += getattr(group.env, "restarts", 0)  # its own sub-env restarts
        while True:
            self.restarts.failed(error, self.what, step)
            self._restarts_base += 1
            log.warning(
                "%s raised %s: %s; making the vector again (restart %d), its episodes cut there",
                self.what, type(error).__name__, error, self._restarts_base,
            )  # fmt: skip
            old, group.env = group.env, None
            try:
                old.close()
            except Exception:  # noqa: BLE001, S110 - a broken env may fail to close too
                pass
            try:
                group.env = self._make_env(group, self._seed(self._restarts_base))
                group.since = time.perf_counter()
                obs, _ = group.env.reset()
                group.since = 0.0
                check_env_output(obs, 0.0)
                break
            except ActingError:
                raise
            except Exception as new_error:  # noqa: BLE001 - counts as one more failure
                group.since = 0.0
                error = new_error
        self.timing["env_time"] += time.perf_counter() - start
        if self.abandoned:
            raise ActorAbandoned(self.what)
        return obs

    def set_weights(self, version: int, weights: list[np.ndarray]) -> None:
        """Loads learner weights tagged with ``version``."""
        start = time.perf_counter()
        self.policy.set_weights(weights)
        self.weights_version = int(version)
        self.timing["weights_time"] += time.perf_counter() - start

    def _alloc(self) -> dict:
        t, b = self.spec.unroll_length, self.spec.num_envs
        obs = self._groups[0].obs

        def new(x):  # [T+1, B, ...] of one observation leaf (a group's leaf is [B/G, ...])
            x = np.asarray(x)
            return np.empty((t + 1, b, *x.shape[1:]), x.dtype)

        observation = new(obs) if isinstance(obs, np.ndarray) else tf.nest.map_structure(new, obs)
        return {
            "observation": observation,
            "first": np.empty((t + 1, b), bool),
            "reset": np.empty((t + 1, b), bool),
            "prev_action": np.empty((t + 1, *self._prev_action.shape), self._prev_action.dtype),
            "prev_reward": np.empty((t + 1, b), np.float32),
            "action": np.empty((t, *self._prev_action.shape), self._prev_action.dtype),
            "reward": np.empty((t, b), np.float32),
            "terminated": np.empty((t, b), bool),
            "truncated": np.empty((t, b), bool),
        }

    def _store_inputs(self, u: dict, t: int, group: _Group) -> None:
        cols = group.cols
        if isinstance(group.obs, np.ndarray):
            u["observation"][t, cols] = group.obs
        else:
            for stored, leaf in zip(
                observation_leaves(u["observation"]), observation_leaves(group.obs)
            ):
                stored[t, cols] = leaf
        u["first"][t, cols] = self._first[cols]
        u["reset"][t, cols] = self._reset[cols]
        u["prev_action"][t, cols] = self._prev_action[cols]
        u["prev_reward"][t, cols] = self._prev_reward[cols]

    def unroll(self) -> tuple[dict, dict]:
        """Runs ``T`` steps; returns ``(unroll, info)`` (failed environments are made again
        within it, see the module docstring).

        ``info``: ``episode_returns``/``episode_lengths`` of episodes that ended during the
        unroll, ``weights_version``, ``env_restarts`` (cumulative), ``actor_id`` and the
        :data:`TIMES` seconds (see module docstring).

        Raises:
          EnvFailure: past the restart limits, or an environment the run cannot use.
          ActorAbandoned: the actor was abandoned while an environment call hung.
        """
        if not self.watched:
            self.watch(None)
        u = self._alloc()
        u["state"] = tuple(np.array(s) for s in self._state)
        self._policies = None
        self._times = [0.0, 0.0]  # inference, env
        # Group g's step t+1 starts right after its step t ends, so while one group's
        # environments step the others' policy steps run (one group: step by step).
        length = self.spec.unroll_length
        try:
            for group in self._groups:
                self._begin_step(u, 0, group)
            for t in range(length):
                for group in self._groups:
                    self._end_step(u, t, group)
                    if t + 1 < length:
                        self._begin_step(u, t + 1, group)
        except BaseException:
            self._drain()
            raise
        self._unrolls += 1
        self._add_times(*self._times)
        for group in self._groups:
            self._store_inputs(u, length, group)
        u["policy"] = self._policies
        if self.spec.ship_frames_once:
            start = time.perf_counter()
            u = pack_unroll(u)
            self.timing["env_time"] += time.perf_counter() - start
        info = {
            "episode_returns": np.asarray(self._episode_returns, np.float64),
            "episode_lengths": np.asarray(self._episode_lengths, np.int64),
            "weights_version": self.weights_version,
            "env_restarts": self.env_restarts,
            "actor_id": self.actor_id,
            **self.timing,
        }
        self._episode_returns, self._episode_lengths = [], []
        self.timing = dict.fromkeys(TIMES, 0.0)
        return u, info

    def _begin_step(self, u: dict, t: int, group: _Group) -> None:
        """Step ``t`` of ``group`` up to its environment call: the inputs stored, the
        policy's action recorded and sent to the environments (stepped now with one group,
        in the helper thread with several)."""
        mark = time.perf_counter()
        cols = group.cols
        self._store_inputs(u, t, group)
        if self._mask_blocks is not None:
            self._check_mask(t, group)
        state = tuple(s[cols] for s in self._state)
        action, params, state = self.policy.step(
            group.obs, self._first[cols], self._prev_action[cols], self._prev_reward[cols], state
        )
        if self._policies is None:
            b = self.spec.num_envs
            self._policies = {
                k: np.empty((self.spec.unroll_length, b, *v.shape[1:]), v.dtype)
                for k, v in params.items()
            }
        for k, v in params.items():
            self._policies[k][t, cols] = v
        u["action"][t, cols] = action
        group.action, group.new_state = action, state
        stepped = time.perf_counter()
        self._times[0] += stepped - mark
        check_actions(action, self._action_space, f"actor {self.actor_id}")
        # The env gets the action in its dtype and bounds (a Gaussian draw clipped to the
        # Box); the unroll keeps the draw itself, which the learner scores.
        env_input = env_action(action, self._action_space)
        group.since = stepped
        if self._stepper is None:
            group.pending = _call(group.env.step, env_input)
        else:
            group.pending = self._stepper.submit(_call, group.env.step, env_input)
        self._times[1] += time.perf_counter() - stepped

    def _end_step(self, u: dict, t: int, group: _Group) -> None:
        """Step ``t`` of ``group`` from its environment call's outcome on: failures handled
        (module docstring), the outcome recorded and the carry moved to step ``t + 1``."""
        mark = time.perf_counter()
        pending, group.pending = group.pending, None
        result, error = pending if isinstance(pending, tuple) else pending.result()
        group.since = 0.0
        if self.abandoned:
            raise ActorAbandoned(self.what) from error
        b = group.cols.stop - group.cols.start
        if error is None and group.check_output:
            try:
                check_env_output(result[0], result[1])
            except ActingError:
                raise
            except Exception as bad:  # noqa: BLE001 - a malformed step counts as a failure
                error = bad
        if isinstance(error, ActingError):  # past the sub-environments' restart limits
            raise error
        if error is not None:  # any env failure restarts the group's vector
            step = self._unrolls * self.spec.unroll_length + t
            obs = self._restart_env(group, error, step)
            reward, terminated, truncated = np.zeros(b), np.zeros(b, bool), np.zeros(b, bool)
            self._cut(u, t, group, np.ones(b, bool))
            inactive = None
        else:
            obs, reward, terminated, truncated, infos = result
            if infos and "env_failed" in infos:
                self._cut(u, t, group, infos["env_failed"])
            inactive = _inactive(infos, group.cols)
        self._advance(u, t, group, obs, reward, terminated, truncated, inactive)
        self._times[1] += time.perf_counter() - mark

    def _drain(self) -> None:
        """Waits for the steps still in flight (an unroll that raises leaves none behind)."""
        for group in self._groups:
            pending, group.pending = group.pending, None
            if pending is not None and not isinstance(pending, tuple):
                pending.result()
            group.since = 0.0

    def _check_mask(self, t: int, group: _Group) -> None:
        """Raises ``NoActionAllowed`` when the observation's action mask allows nothing in a
        column whose action the environment takes (every column but reset steps')."""
        cols = group.cols
        bad = first_all_masked(group.obs[MASK_KEY], self._mask_blocks, skip=self._reset[cols])
        if bad is None:
            return
        env, block = bad
        step = self._unrolls * self.spec.unroll_length + t
        dim = f", action dimension {block}" if len(self._mask_blocks) > 1 else ""
        raise NoActionAllowed(
            f"action_mask: no action allowed at step {step} (env {env + cols.start}{dim}) of "
            f"actor {self.actor_id}: environment {self.spec.env_id} must allow at least one "
            "action"
        )

    def _cut(self, u: dict, t: int, group: _Group, failed: np.ndarray) -> None:
        """Marks the episodes of ``group``'s ``failed`` columns as cut at step ``t`` (module
        docstring): step ``t`` a reset step, the step before truncated, the next
        observation a first one; the cut episodes' statistics are dropped."""
        cols = group.cols
        failed = np.asarray(failed, bool)
        cut = failed & ~self._reset[cols]  # a column in a reset step ended its episode already
        u["reset"][t, cols] |= cut
        if t > 0:  # an episode cut at its first observation has no step to truncate
            u["truncated"][t - 1, cols] |= cut & ~self._first[cols]
        self._reset[cols] |= failed  # first_{t+1} = reset_t
        self._ep_return[cols][failed] = 0.0
        self._ep_length[cols][failed] = 0

    def _add_times(self, inference_time: float, env_time: float) -> None:
        self.timing["inference_time"] += inference_time
        self.timing["env_time"] += env_time

    def _advance(self, u, t, group, obs, reward, terminated, truncated, inactive=None) -> None:
        """Records ``group``'s step ``t`` outcome and moves its carry to step ``t + 1``;
        ``inactive`` (bool ``[B/G]`` or None) marks columns whose step ``t + 1`` reaches no
        environment (an agent out of its game: :mod:`tfagents_vtrace.envs.multi_agent`), a
        masked step like a reset step."""
        cols, action = group.cols, group.action
        reward = np.asarray(reward, np.float32)
        u["reward"][t, cols] = reward
        u["terminated"][t, cols] = terminated
        u["truncated"][t, cols] = truncated
        ended = np.logical_or(terminated, truncated)
        ep_return, ep_length = self._ep_return[cols], self._ep_length[cols]  # views
        ep_return += reward
        first = self._reset[cols].copy()
        ep_length += ~first
        if ended.any():
            self._episode_returns.extend(ep_return[ended].tolist())
            self._episode_lengths.extend(ep_length[ended].tolist())
            ep_return[ended] = 0.0
            ep_length[ended] = 0
        keep = ~first
        self._prev_action[cols] = np.where(
            keep.reshape((-1,) + (1,) * (action.ndim - 1)), action, 0
        ).astype(u["action"].dtype)
        self._prev_reward[cols] = np.where(keep, reward, 0.0)
        self._first[cols] = first
        self._reset[cols] = ended if inactive is None else ended | inactive
        group.obs = obs
        for carried, new in zip(self._state, group.new_state):
            carried[cols] = new

    def close(self) -> None:
        """Closes the environments (and ends the watch)."""
        self.unwatch()
        if self._stepper is not None:
            self._stepper.shutdown(wait=False, cancel_futures=True)
        for group in self._groups:
            if group.env is not None:
                group.env.close()


def _call(step, actions) -> tuple:
    """``(step(actions), None)``, or ``(None, error)`` when it raises."""
    try:
        return step(actions), None
    except Exception as error:  # noqa: BLE001 - the actor handles it (module docstring)
        return None, error


class WeightStore:
    """Thread-safe holder of the latest ``(version, weights)`` published by the learner."""

    def __init__(self):
        self._lock = threading.Lock()
        self._version = -1
        self._weights = None

    def publish(self, version: int, weights: list[np.ndarray]) -> None:
        with self._lock:
            self._version, self._weights = int(version), weights

    @property
    def version(self) -> int:
        return self._version

    def get(self) -> tuple[int, list[np.ndarray] | None]:
        with self._lock:
            return self._version, self._weights


def put_until_stopped(out: queue.Queue, item, stop: threading.Event) -> bool:
    """Puts ``item`` in the bounded queue ``out``, waiting while it is full; returns False
    (item dropped) if ``stop`` is set first. Shared by actor threads and the Ray pool."""
    while not stop.is_set():
        try:
            out.put(item, timeout=0.1)
            return True
        except queue.Full:
            continue
    return False


class ActorThread(threading.Thread):
    """Runs an :class:`Actor` forever: refresh weights by version, unroll, enqueue.

    An exception other than an environment failure is kept in ``error`` and ends the thread
    (the learner loop checks it). A thread whose actor was abandoned (its environment hung,
    :meth:`abandon`) ends without delivering anything once its call returns, if ever.
    """

    def __init__(self, actor: Actor, store: WeightStore, out: queue.Queue, stop: threading.Event):
        super().__init__(name=f"actor-{actor.actor_id}", daemon=True)
        self.actor, self.store, self.out, self.stop = actor, store, out, stop
        self.error: BaseException | None = None

    @property
    def abandoned(self) -> bool:
        return self.actor.abandoned

    def abandon(self) -> None:
        """Marks the thread abandoned (it is stuck in an environment call): it delivers
        nothing more and ends as soon as the call returns."""
        self.actor.abandoned = True

    def deliver(self, item) -> bool:
        """Puts ``item`` in the queue unless the thread was abandoned or stopped."""
        return not self.abandoned and put_until_stopped(self.out, item, self.stop)

    def step(self) -> None:
        """Newest weights, one unroll, into the queue."""
        if self.store.version > self.actor.weights_version:
            self.actor.set_weights(*self.store.get())
        self.deliver(self.actor.unroll())

    def run(self) -> None:
        try:
            while not self.stop.is_set() and not self.abandoned:
                self.step()
        except ActorAbandoned:
            pass  # its replacement acts; nothing to report
        except BaseException as error:  # noqa: BLE001 - reported by the learner loop
            if not self.abandoned:
                self.error = error
                if isinstance(error, ActingError):  # one line for the user, no traceback
                    log.error("%s", error)
                else:
                    log.exception("actor %d failed", self.actor.actor_id)
        finally:
            try:
                self.actor.close()
            except Exception:  # noqa: BLE001, S110
                pass
