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
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from tfagents_vtrace.envs.factory import env_action
from tfagents_vtrace.envs.failures import (
    ActingError,
    ActorAbandoned,
    NoActionAllowed,
    RestartPolicy,
    step_timeout,
    timeout_message,
    watchdog,
)
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
    """"auto" | "tf" | "numpy" (see :mod:`tfagents_vtrace.runtime.acting.policies`)."""
    env_kwargs: dict = dataclasses.field(default_factory=dict)
    """Environment constructor arguments (``RunConfig.env_kwargs``)."""
    env_step_timeout_s: float | None = None
    """Seconds an environment call may take (``RunConfig.env_step_timeout_s``; None or 0:
    no limit): the limit of the watchdog of whoever runs the actor, and of async vectors'
    own waits."""
    ship_frames_once: bool = False
    """Unrolls leave :meth:`Actor.unroll` with a stacked-frame observation packed, each frame
    once (:func:`~tfagents_vtrace.runtime.acting.frames.pack_unroll`): set for actors that
    ship them to a learner, which unpacks them."""


def default_env_factory(spec: ActorSpec) -> Callable[[int], object]:
    """``seed -> VectorEnv`` for ``spec`` using ``tfagents_vtrace.envs.make_vector_env``."""

    from tfagents_vtrace.envs.factory import vector_env_factory

    make = vector_env_factory(spec.env_id, spec.env_mode, spec.env_kwargs,
                              step_timeout(spec.env_step_timeout_s))  # fmt: skip
    return lambda seed: make(spec.num_envs, seed)


def build_network(network_config, env_id: str, env_kwargs: dict | None = None):
    """The network for the spaces of ``env_id`` made with ``env_kwargs``
    (:func:`~tfagents_vtrace.envs.env_spaces`)."""
    from tfagents_vtrace.envs import env_spaces
    from tfagents_vtrace.networks import make_network

    spaces = env_spaces(env_id, env_kwargs)
    return make_network(network_config, spaces.observation, spaces.action)


class Actor:
    """Steps ``spec.num_envs`` environments and returns unrolls (see module docstring).

    Args:
      spec: the :class:`ActorSpec`.
      actor_id: distinguishes the seeds of several actors.
      network: the actor's own network copy (built from the spec when None).
      env_factory: ``seed -> VectorEnv`` (default: ``make_vector_env``); called again with a
        new seed when the whole vector fails.
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
        self.policy = make_policy(network, spec.policy_impl, seed=seed + 7)
        self.weights_version = -1
        self.restarts = RestartPolicy()  # whole-vector failures: window, backoff, EnvFailure
        self.env_call_since = 0.0  # perf_counter() while an env call runs (the watchdog's)
        self.abandoned = False  # set by the owner after a timeout: the next return raises
        self.watched = False  # whether an owner watches the calls (else: the first unroll)
        self._unrolls = 0
        self._episode_returns: list[float] = []
        self._episode_lengths: list[int] = []
        # Seconds per TIMES key since the last unroll's info (a host may add its own).
        self.timing = dict.fromkeys(TIMES, 0.0)
        self.env = self._make_env(seed)
        self._start_episodes()

    def successor(self, network=None) -> Actor:
        """A new actor in this one's place (its environment hung): the same id, spec and
        environment factory, new environments and seeds (the restart count goes on)."""
        return Actor(self.spec, self.actor_id, network, self._env_factory,
                     env_restarts=self.env_restarts + 1)  # fmt: skip

    @property
    def env_restarts(self) -> int:
        """Environments made again so far: whole vectors and single sub-environments."""
        return self._restarts_base + getattr(self.env, "restarts", 0)

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

    def _make_env(self, seed: int):
        """A new vector from the factory; a resilient one reports failed columns at once
        (the actor marks the cut) and names this actor in its messages."""
        self.env_call_since = time.perf_counter()
        env = self._env_factory(seed)
        self.env_call_since = 0.0
        if hasattr(env, "cut_as_truncation"):
            env.cut_as_truncation = False
            env.label = self.what
        self._check_output = not getattr(env, "checks_output", False)
        return env

    def _start_episodes(self) -> None:
        """Resets every environment and the per-env carry (obs, flags, prev, state)."""
        self.env_call_since = time.perf_counter()
        obs, _ = self.env.reset()
        self.env_call_since = 0.0
        b = self.spec.num_envs
        self._obs = obs
        self._first = np.ones(b, bool)
        self._reset = np.zeros(b, bool)
        space = self._action_space = self.env.single_action_space
        # None, or the action mask's blocks (its entries per action dimension)
        self._mask_blocks = mask_blocks(getattr(self.env, "single_observation_space", None), space)
        self._prev_action = np.zeros((b, *space.shape), space.dtype)
        self._prev_reward = np.zeros(b, np.float32)
        self._state = self.policy.initial_state(b)
        self._ep_return = np.zeros(b, np.float64)
        self._ep_length = np.zeros(b, np.int64)

    def _restart_env(self, error: BaseException, step: int):
        """Makes the whole vector again after ``error`` at its step ``step``
        (:class:`RestartPolicy`: a backoff for failures in a row, :class:`EnvFailure` past
        the limits); returns the new vector's first observation (the caller updates the
        carry)."""
        start = time.perf_counter()
        self._restarts_base += getattr(self.env, "restarts", 0)  # its own sub-env restarts
        while True:
            self.restarts.failed(error, self.what, step)
            self._restarts_base += 1
            log.warning(
                "%s raised %s: %s; making the vector again (restart %d), its episodes cut there",
                self.what, type(error).__name__, error, self._restarts_base,
            )  # fmt: skip
            old, self.env = self.env, None
            try:
                old.close()
            except Exception:  # noqa: BLE001, S110 - a broken env may fail to close too
                pass
            try:
                self.env = self._make_env(self._seed(self._restarts_base))
                self.env_call_since = time.perf_counter()
                obs, _ = self.env.reset()
                self.env_call_since = 0.0
                check_env_output(obs, 0.0)
                break
            except ActingError:
                raise
            except Exception as new_error:  # noqa: BLE001 - counts as one more failure
                self.env_call_since = 0.0
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
        if isinstance(self._obs, np.ndarray):
            observation = np.empty((t + 1, *self._obs.shape), self._obs.dtype)
        else:  # a Dict / Tuple observation: one array per leaf
            new = lambda x: np.empty((t + 1, *np.shape(x)), np.asarray(x).dtype)  # noqa: E731
            observation = tf.nest.map_structure(new, self._obs)
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

    def _store_inputs(self, u: dict, t: int) -> None:
        if isinstance(self._obs, np.ndarray):
            u["observation"][t] = self._obs
        else:
            for stored, leaf in zip(
                observation_leaves(u["observation"]), observation_leaves(self._obs)
            ):
                stored[t] = leaf
        u["first"][t] = self._first
        u["reset"][t] = self._reset
        u["prev_action"][t] = self._prev_action
        u["prev_reward"][t] = self._prev_reward

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
        policies = None
        inference_time = env_time = 0.0
        mark = time.perf_counter()  # one clock read per phase change: env -> policy -> env
        for t in range(self.spec.unroll_length):
            self._store_inputs(u, t)
            if self._mask_blocks is not None:
                self._check_mask(t)
            action, params, state = self.policy.step(
                self._obs, self._first, self._prev_action, self._prev_reward, self._state
            )
            if policies is None:
                policies = {
                    k: np.empty((self.spec.unroll_length, *v.shape), v.dtype)
                    for k, v in params.items()
                }
            for k, v in params.items():
                policies[k][t] = v
            u["action"][t] = action
            stepped = time.perf_counter()
            inference_time += stepped - mark
            check_actions(action, self._action_space, f"actor {self.actor_id}")
            self.env_call_since = stepped
            try:
                # The env gets the action in its dtype and bounds (a Gaussian draw clipped
                # to the Box); the unroll keeps the draw itself, which the learner scores.
                obs, reward, terminated, truncated, infos = self.env.step(
                    env_action(action, self._action_space)
                )
                if self._check_output:
                    check_env_output(obs, reward)
            except ActingError as error:  # past the sub-environments' restart limits
                self.env_call_since = 0.0
                if self.abandoned:
                    raise ActorAbandoned(self.what) from error
                raise
            except Exception as error:  # noqa: BLE001 - any env failure restarts the env
                self.env_call_since = 0.0
                if self.abandoned:
                    raise ActorAbandoned(self.what) from error
                obs = self._restart_env(error, self._unrolls * self.spec.unroll_length + t)
                b = self.spec.num_envs
                reward, terminated, truncated = np.zeros(b), np.zeros(b, bool), np.zeros(b, bool)
                self._cut(u, t, np.ones(b, bool))
            else:
                self.env_call_since = 0.0
                if self.abandoned:
                    raise ActorAbandoned(self.what)
                if infos and "env_failed" in infos:
                    self._cut(u, t, infos["env_failed"])
            self._advance(u, t, obs, reward, terminated, truncated, action, state)
            mark = time.perf_counter()
            env_time += mark - stepped
        self._unrolls += 1
        self._add_times(inference_time, env_time)
        self._store_inputs(u, self.spec.unroll_length)
        u["policy"] = policies
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

    def _check_mask(self, t: int) -> None:
        """Raises ``NoActionAllowed`` when the observation's action mask allows nothing in a
        column whose action the environment takes (every column but reset steps')."""
        bad = first_all_masked(self._obs[MASK_KEY], self._mask_blocks, skip=self._reset)
        if bad is None:
            return
        env, block = bad
        step = self._unrolls * self.spec.unroll_length + t
        dim = f", action dimension {block}" if len(self._mask_blocks) > 1 else ""
        raise NoActionAllowed(
            f"action_mask: no action allowed at step {step} (env {env}{dim}) of actor "
            f"{self.actor_id}: environment {self.spec.env_id} must allow at least one action"
        )

    def _cut(self, u: dict, t: int, failed: np.ndarray) -> None:
        """Marks the episodes of the ``failed`` columns as cut at step ``t`` (module
        docstring): step ``t`` a reset step, the step before truncated, the next
        observation a first one; the cut episodes' statistics are dropped."""
        failed = np.asarray(failed, bool)
        cut = failed & ~self._reset  # a column in a reset step ended its episode already
        u["reset"][t] |= cut
        if t > 0:  # an episode cut at its first observation has no step to truncate
            u["truncated"][t - 1] |= cut & ~self._first
        self._reset = self._reset | failed  # first_{t+1} = reset_t
        self._ep_return[failed] = 0.0
        self._ep_length[failed] = 0

    def _add_times(self, inference_time: float, env_time: float) -> None:
        self.timing["inference_time"] += inference_time
        self.timing["env_time"] += env_time

    def _advance(self, u, t, obs, reward, terminated, truncated, action, state) -> None:
        """Records step ``t``'s outcome and moves the carry to step ``t + 1``."""
        reward = np.asarray(reward, np.float32)
        u["reward"][t] = reward
        u["terminated"][t] = terminated
        u["truncated"][t] = truncated
        ended = np.logical_or(terminated, truncated)
        self._ep_return += reward
        self._ep_length += ~self._reset
        if ended.any():
            self._episode_returns.extend(self._ep_return[ended].tolist())
            self._episode_lengths.extend(self._ep_length[ended].tolist())
            self._ep_return[ended] = 0.0
            self._ep_length[ended] = 0
        first = self._reset
        keep = ~first
        self._prev_action = np.where(keep.reshape((-1,) + (1,) * (action.ndim - 1)), action, 0)
        self._prev_action = self._prev_action.astype(u["action"].dtype)
        self._prev_reward = np.where(keep, reward, 0.0).astype(np.float32)
        self._first = first
        self._reset = ended
        self._obs = obs
        self._state = state

    def close(self) -> None:
        """Closes the environment (and ends its watch)."""
        self.unwatch()
        if self.env is not None:
            self.env.close()


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
