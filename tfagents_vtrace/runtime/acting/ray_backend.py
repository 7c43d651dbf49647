"""Ray backend: IMPALA actors hosted by Ray actor processes, feeding the learner's queue.

IMPALA (Espeholt et al. 2018, https://arxiv.org/abs/1802.01561) decouples acting from
learning: many actors, possibly on other machines, step environments with a stale copy of
the policy and ship unrolls to one learner; V-trace corrects the lag. This module hosts the
same :class:`~tfagents_vtrace.runtime.acting.actor.Actor` the local backend runs in threads, one per
Ray actor process (:class:`ActorHost`): each builds its own network and vector environment
from the picklable :class:`~tfagents_vtrace.runtime.acting.actor.ActorSpec` (actor id ``i`` gives
it its own seeds), and exchanges numpy nests only.

On the learner side :class:`RayActorPool` is a driver thread with the interface of
``ActorThread`` (``start``, ``join``, ``is_alive``, ``error``), so the training loop is
unchanged:

* it keeps one ``unroll()`` call in flight per Ray actor, ``ray.wait``\\ s on them and puts
  each ``(unroll, info)`` result into the same bounded queue the local backend uses (a full
  queue holds the next call back, as a blocked actor thread would); an unroll whose frames
  were shipped once (``ship_frames_once``) is stacked again in this thread, beside the
  learner's update (:mod:`~tfagents_vtrace.runtime.acting.frames`);
* weights go by version: when the learner has published a newer version since the last
  broadcast, the pool ``ray.put``\\ s it once and passes the reference (wrapped in a list,
  so Ray does not resolve it) with the next calls; an actor fetches the object only when its
  own version is older;
* a self-play run's snapshot pool goes the same way (:mod:`~tfagents_vtrace.runtime.
  self_play`): each actor is built with the pool as it is and gets it again, one
  ``ray.put`` per version, after the learner has added a snapshot;
* an environment that raises is recreated inside the actor (``env_restarts`` and the
  actor's timings arrive in ``info`` as with threads); a Ray actor process that dies is
  replaced, each replacement counted as an env restart in the run's counters at once (the
  replacement's first call goes out once it is built, as :class:`RayWorkerPool` does);
  an exception raised by the actor code itself is fatal and reported through ``error``, as
  the actor's own exception (its type and message for the run's one line; Ray's text, with
  the remote traceback, as a note: :func:`actor_error`);
* on stop (end of training or any exception in the learner) every Ray actor is killed, and
  Ray is shut down if the pool started it;
* the actors are owned by the training process, not detached: when it dies however it dies
  (SIGKILL included), Ray ends them with it, so a dead run holds no cluster CPUs, and the
  same command resumes from the checkpoint with new actors (an actor holds nothing the
  checkpoint lacks: weights come from the learner, its environments start new episodes).

Restart limits count deaths in a window, as RLlib's ``restart_failed_env_runners`` keeps a
run going through occasional failures: a process of one actor id that dies more than
``RESTART_LIMIT`` (5) times within ``RESTART_WINDOW_S`` (300 s) ends the run with
:class:`RayWorkerLost`, an :class:`~tfagents_vtrace.envs.failures.EnvFailure`, so the
driver first saves a checkpoint of the learner (which lost nothing) and ``tfv-train`` ends
with one line naming the actor, its last error and what to do (exit 1). Deaths further apart
(an OOM kill now and then, a node lost and replaced) never end a run. A dead call's claimed
environment steps go back to the step budget.

Signals: ``ray.init`` installs its own SIGTERM handler (Python's ``sys.exit``, and Ray's core
worker a C++ failure-signal handler that dumps a stack on SIGTERM), which replaced the run's
"checkpoint, then stop" handler. :func:`init_ray` puts the Python handlers of SIGINT, SIGTERM
and SIGHUP that were in place before ``ray.init`` back right after it (re-installing a Python
handler also replaces the C++ one), and blocks SIGINT and SIGHUP in the thread that starts
Ray's own processes (GCS, raylet, agents: they share the terminal's process group, and a
blocked mask is inherited by a child and its children), so a Ctrl-C or a closed terminal
reaches the training process, which checkpoints and shuts Ray down, rather than killing
Ray under it. Each actor process (:class:`HostProcess`) ignores SIGINT and SIGHUP too.

A given ``--ray_address`` must answer within ``CONNECT_TIMEOUT_S`` (30 s): its port is
probed first, and Ray's own connection is limited to one attempt (``ray.init`` retries an
address that does not answer for many minutes, printing ``Failed to connect to GCS``), so a
wrong address ends the start with one line naming ``ray_address`` (a ``ValueError``: exit 2).

Under ``strategy="multi_worker"`` every learner worker process is a Ray driver with a pool
of its own ``num_actors`` actors (seeded by its worker role) feeding only its own learner.

Starting Ray and the actor processes, replacing dead ones, weights by version and the kill
on stop are :class:`RayProcesses`', which the asynchronous workers' :class:`RayWorkerPool`
shares (A3C's and ACER's Ray workers: :mod:`tfagents_vtrace.agents.a3c.ray_workers`,
:mod:`tfagents_vtrace.agents.acer.ray_workers`; TAAC's collectors); a host class derives from
:class:`HostProcess` (:class:`NetworkHost` for the workers that learn with their own network
copies), and the pools of agents with a replay from :class:`AgentWorkerPool`.

Ray is imported lazily: importing :mod:`tfagents_vtrace` never imports it, and using the
backend without Ray installed raises ``ImportError`` saying ``pip install .[ray]``.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import math
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator

import gymnasium as gym

from tfagents_vtrace.envs.failures import (
    ActingError,
    EnvFailure,
)
from tfagents_vtrace.runtime.acting.actor import group_size, put_until_stopped
from tfagents_vtrace.runtime.acting.frames import unpack_unroll
from tfagents_vtrace.runtime.acting.step_budget import StepBudget
from tfagents_vtrace.utils.blas import limit_blas_threads

log = logging.getLogger(__name__)

RAY_MISSING = (
    "backend='ray' needs Ray, which is not installed: pip install .[ray] "
    "(or pip install 'ray[default]==2.60.0')"
)


RESTART_LIMIT = 5
"""Deaths of one actor id's process within ``RESTART_WINDOW_S`` that are replaced; one more
ends the run (:class:`RayWorkerLost`)."""
RESTART_WINDOW_S = 300.0
"""The window (seconds) in which :data:`RESTART_LIMIT` counts deaths."""
CONNECT_TIMEOUT_S = 30.0
"""How long a given ``ray_address`` may take to accept a connection."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""The signals whose Python handlers :func:`init_ray` keeps across ``ray.init``."""


class RayWorkerLost(EnvFailure):
    """A Ray actor or worker process died more than ``RESTART_LIMIT`` times within
    ``RESTART_WINDOW_S``: the run ends after a checkpoint (an
    :class:`~tfagents_vtrace.envs.failures.EnvFailure`, which the driver saves on);
    ``str(error)`` is one line for the user."""


def import_ray():
    """Returns the ``ray`` module; raises ``ImportError`` with install instructions if absent."""
    try:
        import ray
    except ImportError as error:
        raise ImportError(RAY_MISSING) from error
    return ray


@contextlib.contextmanager
def keep_signal_handlers() -> Iterator[None]:
    """Inside, SIGINT and SIGHUP are blocked in this thread (processes started meanwhile
    inherit the mask: Ray's services ignore a Ctrl-C or a hang-up sent to the terminal's
    process group); on leaving, the Python handlers of :data:`STOP_SIGNALS` from before are
    installed again and the mask restored (a signal that arrived meanwhile is handled then).

    ``ray.init`` replaces the SIGTERM handler (module docstring); installing a Python handler
    again also takes the signal back from the C++ handler Ray's core worker set. Outside the
    main thread (where no handler can be set) this does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handlers = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGHUP})
    try:
        yield
    finally:
        for signum, handler in handlers.items():
            if handler is not None:  # None: set outside Python, nothing to put back
                signal.signal(signum, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def init_local_ray(num_cpus: int, **kwargs) -> None:
    """Starts a private Ray on this machine (``ray.init(address="local")``: a new instance
    even if a cluster runs here) whose worker processes run at niceness 0, keeping the
    process's signal handlers (:func:`keep_signal_handlers`).

    Ray starts its workers at niceness 15 by default, which suits a cluster node where they
    should yield to Ray's own services; here they are the run's actors, sharing the cores with
    its learner (niceness 0) and anything else on the machine, and at 15 they got a few
    percent of a core whenever those were busy. ``RAY_worker_niceness`` in the environment
    still wins. ``kwargs`` go to ``ray.init``.
    """
    ray = import_ray()
    if "RAY_worker_niceness" not in os.environ:
        kwargs["_system_config"] = {"worker_niceness": 0, **kwargs.get("_system_config", {})}
    with keep_signal_handlers():
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **kwargs)


def _host_port(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of ``"HOST:PORT"`` or ``"ray://HOST:PORT"``; None for ``"auto"`` and
    other forms Ray resolves itself. Raises ValueError naming ``ray_address`` for a port that
    is not a number."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rstrip("/").rpartition(":")
    if not sep or not host:
        return None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(
            f"ray_address: expected HOST:PORT (e.g. 127.0.0.1:6379) or 'auto', received {address!r}"
        )
    return host.strip("[]"), int(port)


def probe_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Raises ValueError naming ``ray_address`` unless ``address``'s host accepts a TCP
    connection on its port within ``timeout_s`` (a refused connection or an unknown host
    fails at once)."""
    target = _host_port(address)
    if target is None:
        return
    try:
        with socket.create_connection(target, timeout=timeout_s):
            return
    except OSError as error:
        reason = error.strerror or (
            f"no answer within {timeout_s:g} s"
            if isinstance(error, TimeoutError)
            else type(error).__name__
        )
    raise ValueError(
        f"ray_address: no Ray cluster answers at {address} ({reason}); start one there "
        f"(ray start --head --port=PORT) and pass its address, or leave --ray_address unset "
        f"to start a private Ray with the run"
    )


def init_ray(address: str | None, num_cpus: int) -> None:
    """Connects to the Ray cluster at ``address``, or starts a private one with ``num_cpus``
    (:func:`init_local_ray`) when it is None, keeping the process's signal handlers.

    A given address is probed first (:func:`probe_address`) and Ray tries it once (unless
    ``RAY_gcs_server_port_wait_time_s`` is set): Ray's own retries of an address that
    does not answer last many minutes. Raises ValueError naming ``ray_address`` when it
    cannot be reached.
    """
    if not address:
        init_local_ray(num_cpus)
        return
    probe_address(address)
    ray = import_ray()
    variable = "RAY_gcs_server_port_wait_time_s"  # Ray's connection attempts, ~40 s each
    set_here = variable not in os.environ
    if set_here:
        os.environ[variable] = "1"
    try:
        with keep_signal_handlers():
            ray.init(address=address, log_to_driver=True)
    except (ConnectionError, RuntimeError) as error:
        if ray.is_initialized():
            raise
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise ValueError(
            f"ray_address: cannot connect to a Ray cluster at {address} ({first}); check "
            f"the address and that the cluster runs this Ray version, or leave --ray_address "
            f"unset to start a private Ray with the run"
        ) from None
    finally:
        if set_here:
            os.environ.pop(variable, None)


def check_run_config(run) -> None:
    """Fails early (when the actor-learner is built) if ``run`` cannot use the Ray backend.

    Raises:
      ImportError: Ray is not installed.
      ValueError: ``num_actors`` is 0 (the inline actor has no Ray form).
    """
    import_ray()
    if run.num_actors < 1:
        raise ValueError(
            f"num_actors: backend='ray' expects >= 1 Ray actor, received {run.num_actors}"
        )


def _vector_env(env_factory: Callable, num_envs: int, seed: int):
    """``seed -> env_factory(num_envs, seed)`` as a picklable partial (no closure over the
    actor-learner, which holds TensorFlow state)."""
    return env_factory(num_envs, seed)


def host_env_factory(env_factory: Callable | None, num_envs: int):
    """The picklable ``seed -> VectorEnv`` a Ray host builds its environments with, from a
    run's ``(num_envs, seed) -> VectorEnv`` (None: the host's default, ``make_vector_env``)."""
    return None if env_factory is None else functools.partial(_vector_env, env_factory, num_envs)


def user_env_specs(env_ids) -> tuple:
    """The gymnasium registrations of ``env_ids`` that are the user's own environments in
    this process (the ``user/...`` ids :func:`~tfagents_vtrace.envs.user_envs.resolve_env`
    registers for a class or function, games of many agents included), which a Ray host's
    new process does not have."""
    from tfagents_vtrace.envs.user_envs import USER_NAMESPACE

    prefix = f"{USER_NAMESPACE}/"
    return tuple(gym.registry[i] for i in sorted(set(env_ids))
                 if i.startswith(prefix) and i in gym.registry)  # fmt: skip


def register_specs(specs) -> None:
    """Registers each gymnasium ``EnvSpec`` of ``specs`` whose id this process lacks."""
    for spec in specs:
        if spec.id not in gym.registry:
            gym.registry[spec.id] = spec


def with_env_specs(host_class: type, args: tuple) -> type:
    """``host_class``, or, for a :class:`HostProcess` whose arguments ``args`` name a user's
    own environment (an ``env_id`` attribute: an ``ActorSpec``, a ``RunConfig``), a subclass
    carrying its registration (:func:`user_env_specs`): the host's process registers it before
    it makes an environment (the class or function the user gave is pickled with it, by
    reference when its module can be imported there)."""
    if not (isinstance(host_class, type) and issubclass(host_class, HostProcess)):
        return host_class
    ids = [a.env_id for a in args if isinstance(getattr(a, "env_id", None), str)]
    specs = user_env_specs(ids)
    if not specs:
        return host_class
    return type(host_class.__name__, (host_class,), {"env_specs": specs})


class HostProcess:
    """Base of a Ray actor body: ignores SIGINT and SIGHUP (a Ctrl-C or a closed terminal is
    for the training process, which checkpoints and then ends its actors), limits
    TensorFlow's threads in the new process before it runs anything and numpy's BLAS pool
    to one thread, registers the project's env ids, and answers :meth:`pid`."""

    env_specs: tuple = ()
    """The registrations of the user's own environments to make here (:func:`user_env_specs`;
    a pool's hosts are a subclass that sets them)."""

    def __init__(self, tf_threads: int = 1):
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGHUP):
                signal.signal(signum, signal.SIG_IGN)
        import tensorflow as tf

        try:  # before TensorFlow runs anything in this process
            tf.config.threading.set_intra_op_parallelism_threads(tf_threads)
            tf.config.threading.set_inter_op_parallelism_threads(tf_threads)
        except RuntimeError:
            pass
        import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids

        register_specs(type(self).env_specs)
        limit_blas_threads()  # for the host's life (utils/blas.py)

    def pid(self) -> int:
        """The process id (tests use it to tell actors apart and to probe liveness)."""
        return os.getpid()


class ActorHost(HostProcess):
    """The body of one Ray actor: an :class:`Actor` built inside the actor's own process.

    Args:
      spec: the picklable ``ActorSpec``.
      actor_id: seeds and identifies the actor (``info["actor_id"]``).
      env_factory: optional picklable ``seed -> VectorEnv``.
      snapshots: a self-play run's ``(SelfPlaySpec, version, state)`` of its snapshot pool
        (:meth:`~tfagents_vtrace.runtime.self_play.SelfPlaySpec.serve`), or None.
      env_restarts: restart count to continue from (a replaced actor keeps its count).
      tf_threads: TensorFlow intra/inter-op threads in this process.
    """

    def __init__(self, spec, actor_id: int, env_factory=None, snapshots=None,
                 env_restarts: int = 0, tf_threads: int = 1):  # fmt: skip
        super().__init__(tf_threads)
        from tfagents_vtrace.runtime.acting.actor import Actor, build_network

        self.pool, self._pool_version = None, -1
        if snapshots is not None:  # self-play: this process's games play the run's pool
            self_play, version, state = snapshots
            self.pool = self_play.serve(
                state, lambda: build_network(spec.network_config, spec.env_id, spec.env_kwargs)
            )
            self._pool_version = version
        self.actor = Actor(spec, actor_id, None, env_factory, env_restarts=int(env_restarts))

    def unroll(self, version: int, weights_ref: list,
               snapshots: tuple | None = None) -> tuple[dict, dict] | None:  # fmt: skip
        """Loads weights ``version`` if newer than the actor's, then runs one unroll.

        ``weights_ref`` is ``[ObjectRef]`` of the weights list (fetched only when stale; the
        fetch counts in ``info["weights_time"]``); ``snapshots``, a self-play run's
        ``(version, [ObjectRef])`` of its pool's state, loaded when newer than this
        process's. Returns ``(unroll, info)``, or None when the environment raised and was
        recreated.
        """
        load_weights(self.actor, version, weights_ref)
        if snapshots is not None and self.pool is not None and snapshots[0] > self._pool_version:
            import ray

            self.pool.load(ray.get(snapshots[1][0]))
            self._pool_version = snapshots[0]
        return self.actor.unroll()

    def snapshot_steps(self) -> list[int]:
        """Self-play: the steps of the snapshots this process's pool holds (empty without)."""
        if self.pool is None:
            return []
        steps = self.pool.steps.numpy()
        return sorted(int(s) for s in steps[steps >= 0])


def load_weights(actor, version: int, weights_ref: list, acting: Callable = lambda w: w):
    """In a Ray host: fetches the weights of ``version`` (``weights_ref[0]``; the fetch counts
    in ``actor``'s ``weights_time``) if they are newer than those of ``actor`` (an
    :class:`Actor`) and loads ``acting(weights)``, the part it acts with, into it; returns the
    fetched weights, None if it kept its own."""
    if version <= actor.weights_version:
        return None
    import ray

    start = time.perf_counter()
    weights = ray.get(weights_ref[0])
    actor.timing["weights_time"] += time.perf_counter() - start
    actor.set_weights(version, acting(weights))
    return weights


class NetworkHost(HostProcess):
    """The body of one asynchronous worker process (A3C's, ACER's): its own copies of the
    networks named by ``NETWORKS`` and an :class:`Actor` acting with the first one, whose
    gradients the worker computes.

    Args:
      spec: the worker's ``ActorSpec`` (``unroll_length`` = t_max).
      config: the run's agent config (the loss settings).
      worker_id: seeds the environments and action sampling, identifies the worker.
      env_factory: optional picklable ``seed -> VectorEnv``.
      env_restarts: restart count to continue from (a replaced worker keeps its count).
      tf_threads: TensorFlow intra/inter-op threads in this process.
    """

    NETWORKS: tuple[str, ...] = ("network",)

    def __init__(self, spec, config, worker_id: int, env_factory=None, env_restarts: int = 0,
                 tf_threads: int = 1):  # fmt: skip
        super().__init__(tf_threads)
        from tfagents_vtrace.runtime.acting.actor import Actor, build_network

        self.config = config
        for name in self.NETWORKS:
            setattr(self, name, build_network(spec.network_config, spec.env_id, spec.env_kwargs))
        self.actor = Actor(spec, worker_id, self.network, env_factory, int(env_restarts))

    def load(self, version: int, weights_ref: list) -> None:
        """Loads the weights of ``version`` if newer than the actor's (:func:`load_weights`):
        ``weights_ref[0]`` holds one weights list per network of ``NETWORKS``, in order."""
        weights = load_weights(self.actor, version, weights_ref, lambda w: w[0])
        if weights is None:
            return
        acting = getattr(self.actor.policy, "network", None)  # loaded with the actor
        for name, values in zip(self.NETWORKS, weights, strict=True):
            if getattr(self, name) is not acting:  # e.g. a numpy policy acts: the copy to learn
                getattr(self, name).set_weights(values)


class DeathWindow:
    """The deaths of one actor id in a sliding window: :meth:`add` records one and says
    whether it may be replaced (at most ``limit`` deaths within the last ``window_s``
    seconds), so occasional deaths never add up to the end of a run while a process that
    keeps dying ends it soon. ``clock`` gives the time (tests pass their own)."""

    def __init__(self, limit: int, window_s: float, clock: Callable[[], float] = time.monotonic):
        if int(limit) < 0 or not float(window_s) > 0:
            raise ValueError(
                f"max_actor_restarts, restart_window_s: expected >= 0 and > 0, received "
                f"{limit}, {window_s}"
            )
        self.limit, self.window_s, self.clock = int(limit), float(window_s), clock
        self.times: collections.deque = collections.deque()

    def count(self) -> int:
        """Deaths within the last ``window_s``."""
        start = self.clock() - self.window_s
        while self.times and self.times[0] <= start:
            self.times.popleft()
        return len(self.times)

    def add(self) -> bool:
        """Records a death now; whether the deaths within the window are still at most
        ``limit``."""
        self.times.append(self.clock())
        return self.count() <= self.limit


def one_line(error: BaseException) -> str:
    """``"Type: first line of the message"`` without its final period (Ray's errors run over
    several lines)."""
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0].rstrip('.')}" if lines else type(error).__name__


def actor_error(error: BaseException) -> BaseException:
    """The exception a Ray actor's code raised (``RayTaskError.cause``: its own type and
    message, for the run's one line) rather than Ray's wrapper, whose message starts with
    the remote call's name; Ray's text, which holds the remote traceback, goes with it as a
    note (printed with its traceback). The wrapper when it holds no cause."""
    cause = getattr(error, "cause", None)
    if not isinstance(cause, BaseException):
        return error
    cause.add_note(f"raised in a Ray actor: {error}")
    return cause


def ray_logs_dir() -> str:
    """The log directory of this process's Ray session (Ray's default when unknown)."""
    try:
        from ray._private import worker

        return os.path.join(worker._global_node.get_session_dir_path(), "logs")
    except Exception:  # noqa: BLE001 - a private API: fall back to the default place
        return "/tmp/ray/session_latest/logs"


class RayProcesses:
    """Ray actor processes of one host class, by id: started together, replaced when one
    dies, killed at the end; weights go to them by version.

    The machinery the IMPALA actor pool (:class:`RayActorPool`) and the asynchronous A3C
    workers (:mod:`tfagents_vtrace.agents.a3c.ray_workers`) share. A subclass names its
    ``host_class`` (a :class:`HostProcess` whose constructor takes ``env_restarts=``) and
    the constructor arguments of host ``i`` (:meth:`host_args`).

    Args:
      num_actors: Ray actors (ids ``0 .. num_actors - 1``).
      address: Ray cluster to connect to (``"auto"``, ``"HOST:6379"``, ``"ray://..."``);
        None starts a new local Ray (``address="local"``, no dashboard) with
        ``max(cpu_count, ceil(num_actors * actor_cpus))`` CPUs, shut down at the end.
        Ignored if Ray is already initialised in this process.
      actor_cpus: CPUs each Ray actor reserves (fractions pack several actors on a core).
      max_actor_restarts: replacements of one actor id's dead process within
        ``restart_window_s``; the next death within it raises :class:`RayWorkerLost`
        (None: :data:`RESTART_LIMIT`).
      restart_window_s: the window (seconds) in which deaths count (None:
        :data:`RESTART_WINDOW_S`).
      start_timeout_s: how long :meth:`launch` waits for every actor to be built.
    """

    host_class: type = ActorHost
    what = "Ray actor"

    def __init__(self, num_actors: int, *, address: str | None = None, actor_cpus: float = 1.0,
                 max_actor_restarts: int | None = None, restart_window_s: float | None = None,
                 start_timeout_s: float = 600.0):  # fmt: skip
        if num_actors < 1:
            raise ValueError(f"num_actors: expected >= 1, received {num_actors}")
        self.num_actors = int(num_actors)
        self.address, self.actor_cpus = address, float(actor_cpus)
        limit = RESTART_LIMIT if max_actor_restarts is None else max_actor_restarts
        window_s = RESTART_WINDOW_S if restart_window_s is None else restart_window_s
        self.deaths = [DeathWindow(limit, window_s) for _ in range(self.num_actors)]
        self.start_timeout_s = float(start_timeout_s)
        self.handles: list = []
        self.actor_restarts = [0] * self.num_actors
        self._env_restarts = [0] * self.num_actors
        self._owns_ray = False
        self._remote = None
        self._weights_version, self._weights_ref = None, None

    def host_args(self, actor_id: int) -> tuple:
        """Positional constructor arguments of host ``actor_id``."""
        raise NotImplementedError

    def launch(self) -> None:
        """Connects to / starts Ray, creates the actors and waits until they are built; on
        failure kills what started (and Ray, if this started it) and raises."""
        ray = import_ray()
        if not ray.is_initialized():
            cpus = max(os.cpu_count() or 1, math.ceil(self.num_actors * self.actor_cpus))
            init_ray(self.address, cpus)  # None: "local", a new instance even beside a cluster
            self._owns_ray = True
        try:
            self.handles = [self._new_actor(i) for i in range(self.num_actors)]
            self._wait_ready(ray)
        except BaseException:
            self._shutdown()
            raise

    def _wait_ready(self, ray) -> None:
        """Waits until every actor is built (so each contributes from the first update);
        raises the error of an actor that failed to build, or a clear error if the cluster
        cannot place them within ``start_timeout_s``."""
        calls = [handle.pid.remote() for handle in self.handles]
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=self.start_timeout_s)
        ray.get(ready)  # re-raises an actor's construction error
        if len(ready) < len(calls):
            raise RuntimeError(
                f"only {len(ready)} of {len(calls)} {self.what}s started within "
                f"{self.start_timeout_s:.0f} s (each reserves {self.actor_cpus} CPU; cluster "
                f"resources: {ray.cluster_resources()})"
            )

    def _new_actor(self, actor_id: int):
        args = self.host_args(actor_id)
        if self._remote is None:
            self._remote = (
                import_ray()
                .remote(with_env_specs(self.host_class, args))
                .options(num_cpus=self.actor_cpus, max_restarts=0)
            )
        return self._remote.remote(*args, env_restarts=self._env_restarts[actor_id])

    def _shutdown(self) -> None:
        """Kills every Ray actor; shuts Ray down if this started it."""
        ray = import_ray()
        for handle in self.handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
            self._owns_ray = False

    def _weights(self, store) -> tuple[int, list]:
        """``(version, [ObjectRef])`` of the latest weights in ``store`` (``version`` and
        ``get() -> (version, weights)``, e.g. a ``WeightStore``); one ``ray.put`` per
        version that reaches an actor."""
        if store.version != self._weights_version:
            version, weights = store.get()
            self._weights_ref = import_ray().put(weights)
            self._weights_version = version
        return self._weights_version, [self._weights_ref]

    def _replace(self, actor_id: int, error: BaseException) -> None:
        """Replaces a dead actor process (its environments died with it: one env restart);
        raises :class:`RayWorkerLost` when its deaths within the window pass the limit."""
        window = self.deaths[actor_id]
        if not window.add():
            deaths = window.count()
            raise RayWorkerLost(
                f"{self.what} {actor_id} died {deaths} time{'s' * (deaths != 1)} within "
                f"{window.window_s:g} s (at most {window.limit} replacements per "
                f"{window.window_s:g} s); last error: {one_line(error)}; find the cause in "
                f"the Ray worker logs ({ray_logs_dir()}: often memory, or a crash in the "
                f"environment), then run the same command to resume from the checkpoint"
            ) from error
        self.actor_restarts[actor_id] += 1
        self._env_restarts[actor_id] += 1
        log.warning("%s %d died (%s); replacing it", self.what, actor_id, one_line(error))
        try:
            import_ray().kill(self.handles[actor_id], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self.handles[actor_id] = self._new_actor(actor_id)

    def _restart(self, actor_id: int, error: BaseException, counters=None):
        """Replaces a dead actor process and counts the restart at once in ``counters`` (if
        given; not with its successor's first result, which a run ending meanwhile would
        never see); returns the ObjectRef of the replacement's ``pid()``, ready once it is
        built: its first call is sent only then (a call queued meanwhile would act with the
        weights of the moment it was sent)."""
        self._replace(actor_id, error)
        if counters is not None:
            info = {"episode_returns": (), "episode_lengths": (), "actor_id": actor_id,
                    "env_restarts": self._env_restarts[actor_id]}  # fmt: skip
            counters.add(info=info)
        return self.handles[actor_id].pid.remote()


class RayActorPool(RayProcesses, threading.Thread):
    """``num_actors`` Ray actors driven by one learner-side thread (see module docstring).

    Args:
      spec: the ``ActorSpec`` every actor is built from.
      num_actors: Ray actors (actor ids ``0 .. num_actors - 1``).
      store: the learner's ``WeightStore`` (``version`` + weights list).
      out: the bounded queue of ``(unroll, info)`` the learner consumes.
      stop: set by the learner to end the pool.
      env_factory: optional picklable ``(num_envs, seed) -> VectorEnv`` (tests).
      counters: the run's counters, which count a replaced actor's restart at once (None:
        when its successor's first unroll arrives).
      snapshots: a self-play run's ``(SelfPlaySpec, SnapshotPool)``: each actor is built
        with the pool's state, and gets it again by version (one ``ray.put`` per version)
        when the learner has added a snapshot, as weights go.
      address, actor_cpus, max_actor_restarts, restart_window_s, start_timeout_s: see
        :class:`RayProcesses`.
    """

    def __init__(self, spec, num_actors: int, store, out: queue.Queue, stop: threading.Event,
                 *, env_factory=None, counters=None, snapshots=None,
                 address: str | None = None, actor_cpus: float = 1.0,
                 max_actor_restarts: int | None = None, restart_window_s: float | None = None,
                 start_timeout_s: float = 600.0):  # fmt: skip
        threading.Thread.__init__(self, name="ray-actors", daemon=True)
        RayProcesses.__init__(
            self, num_actors, address=address, actor_cpus=actor_cpus,
            max_actor_restarts=max_actor_restarts, restart_window_s=restart_window_s,
            start_timeout_s=start_timeout_s,
        )  # fmt: skip
        self.spec, self.counters = spec, counters
        self.store, self.out, self.stop = store, out, stop
        self._env_factory = host_env_factory(env_factory, group_size(spec))
        self.snapshots = snapshots
        self._pool_version, self._pool_ref = None, None
        self.error: BaseException | None = None

    @classmethod
    def from_run(cls, run, spec, store, out: queue.Queue, stop: threading.Event,
                 env_factory=None, counters=None, snapshots=None) -> RayActorPool:  # fmt: skip
        """The pool a ``RunConfig`` asks for (``num_actors``, ``ray_address``,
        ``ray_actor_cpus``)."""
        return cls(spec, run.num_actors, store, out, stop, env_factory=env_factory,
                   counters=counters, snapshots=snapshots, address=run.ray_address,
                   actor_cpus=run.ray_actor_cpus)  # fmt: skip

    def host_args(self, actor_id: int) -> tuple:
        snapshots = None
        if self.snapshots is not None:  # the pool as it is now (a replacement's too)
            self_play, pool = self.snapshots
            version = pool.version
            snapshots = (self_play, version, pool.state())
        return (self.spec, actor_id, self._env_factory, snapshots)

    def _pool(self) -> tuple[int, list] | None:
        """Self-play: ``(version, [ObjectRef])`` of the pool's state, one ``ray.put`` per
        version that reaches an actor (as :meth:`_weights`); None without self-play."""
        if self.snapshots is None:
            return None
        pool = self.snapshots[1]
        if pool.version != self._pool_version:
            version = pool.version
            self._pool_ref = import_ray().put(pool.state())
            self._pool_version = version
        return self._pool_version, [self._pool_ref]

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Connects to / starts Ray, creates the actors and waits until they are built (in
        the caller's thread), then drives them from this thread."""
        self.launch()
        threading.Thread.start(self)

    def run(self) -> None:
        try:
            self._drive()
        except BaseException as error:  # noqa: BLE001 - reported by the learner loop
            self.error = error
            if not isinstance(error, ActingError):  # whose one line the run's end prints
                log.exception("Ray actor pool failed")
        finally:
            self._shutdown()

    # ------------------------------------------------------------------ driving
    def _submit(self, actor_id: int):
        version, ref = self._weights(self.store)
        pool = self._pool()  # self-play only: other runs' hosts take (version, ref)
        args = (version, ref) if pool is None else (version, ref, pool)
        return self.handles[actor_id].unroll.remote(*args)

    def _drive(self) -> None:
        ray = import_ray()
        pending = {self._submit(i): i for i in range(self.num_actors)}
        starting: dict = {}  # ObjectRef of a replacement's pid() -> actor id
        while not self.stop.is_set():
            ready, _ = ray.wait([*pending, *starting], num_returns=1, timeout=0.1)
            for ref in ready:
                if ref in starting:  # a replacement is built (or failed to build)
                    actor_id = starting.pop(ref)
                    try:
                        ray.get(ref)
                    except ray.exceptions.RayActorError as error:
                        starting[self._restart(actor_id, error, self.counters)] = actor_id
                    else:
                        pending[self._submit(actor_id)] = actor_id
                    continue
                actor_id = pending.pop(ref)
                try:
                    item = ray.get(ref)
                except ray.exceptions.RayActorError as error:  # replace; first call once built
                    starting[self._restart(actor_id, error, self.counters)] = actor_id
                    continue
                except ray.exceptions.RayTaskError as error:  # the actor's code raised
                    raise actor_error(error) from None
                if item is not None and not self._deliver(actor_id, item):
                    return
                pending[self._submit(actor_id)] = actor_id

    def _deliver(self, actor_id: int, item: tuple[dict, dict]) -> bool:
        """Puts an actor's ``(unroll, info)`` into the learner's queue; False once stopped."""
        unroll, info = item  # stacked again here, beside the learner's update
        self._env_restarts[actor_id] = int(info["env_restarts"])
        return put_until_stopped(self.out, (unpack_unroll(unroll), info), self.stop)


class RayWorkerPool(RayProcesses):
    """Asynchronous workers on Ray processes (A3C, ACER), driven from the driver's thread with
    the ``advance()`` / ``close()`` of the thread ``WorkerPool``.

    One call is in flight per worker. Each call's environment steps (``steps``) are claimed
    from a :class:`~tfagents_vtrace.runtime.acting.step_budget.StepBudget` before it is sent, so
    the run ends within one call of ``total``. :meth:`advance` waits up to ``poll_s`` for
    results and handles those that arrived in arrival order: :meth:`apply` (the subclass:
    apply the gradients, count) and the worker's next call (:meth:`call`), with the weights
    that now include its own update. An empty result (the worker's environment raised and
    was recreated) and the call of a process that died give their claim back; a dead process
    is replaced, its restart counted at once (``counters``' ``env_restarts``), and its next
    call sent once the replacement is built; past the restart limit :meth:`advance` raises
    :class:`RayWorkerLost`. Other errors of a worker's code raise from :meth:`advance`.

    A subclass sets ``host_class`` and defines :meth:`host_args`, :meth:`call` and
    :meth:`apply`, and the weights it sends as a store (``version``, ``get()``, see
    :meth:`RayProcesses._weights`).
    """

    poll_s = 0.1
    """Longest wait of one :meth:`advance` for results."""

    def __init__(self, num_workers: int, steps: int, start: int, total: int, counters,
                 **ray_options):  # fmt: skip
        super().__init__(num_workers, **ray_options)
        self.steps, self.counters = int(steps), counters
        self.budget = StepBudget(start, total)
        self.worker_steps = [0] * self.num_actors
        self.pending: dict = {}  # ObjectRef of a call -> worker id
        self.starting: dict = {}  # ObjectRef of a replacement's pid() -> worker id
        self.metrics: dict = {}
        self.stopped = False

    def call(self, worker_id: int):
        """Sends worker ``worker_id`` its next call; returns the ObjectRef of its result."""
        raise NotImplementedError

    def apply(self, worker_id: int, item) -> tuple[dict, dict]:
        """Handles a worker's non-empty result; returns ``(metrics, info)`` (``info``: the
        actor's unroll info, counted by the subclass)."""
        raise NotImplementedError

    def dropped(self, worker_id: int) -> None:
        """Called when a worker's call came back empty or its process died (its environments
        started new episodes): nothing by default."""

    def start(self) -> None:
        """Starts the worker processes (waiting until they are built) and sends each its first
        call."""
        self.launch()
        for i in range(self.num_actors):
            self._submit(i)

    def _submit(self, worker_id: int) -> None:
        if not self.stopped and self.budget.claim(self.steps):
            self.pending[self.call(worker_id)] = worker_id

    def advance(self) -> dict:
        """Waits up to ``poll_s``; handles the results that arrived (class docstring).
        Returns the newest metrics."""
        if not (self.pending or self.starting):
            time.sleep(self.poll_s)
            return self.metrics
        ray = import_ray()
        waiting = [*self.pending, *self.starting]
        ready, _ = ray.wait(waiting, num_returns=1, timeout=self.poll_s)
        if ready:  # and whatever else has arrived meanwhile
            ready, _ = ray.wait(waiting, num_returns=len(waiting), timeout=0)
        for ref in ready:
            if ref in self.starting:  # a replacement is built (or failed to build)
                worker_id = self.starting.pop(ref)
                try:
                    ray.get(ref)
                except ray.exceptions.RayActorError as error:
                    self._restart_worker(worker_id, error)
                    continue
                self._submit(worker_id)
                continue
            worker_id = self.pending.pop(ref)
            try:
                item = ray.get(ref)
            except ray.exceptions.RayActorError as error:  # the process died: replace it
                self.budget.release(self.steps)
                self.dropped(worker_id)
                self._restart_worker(worker_id, error)
                continue
            if item is None:  # dropped: its environment failed and was recreated
                self.budget.release(self.steps)
                self.dropped(worker_id)
            else:
                self.metrics, info = self.apply(worker_id, item)
                self._env_restarts[worker_id] = int(info["env_restarts"])
                self.worker_steps[worker_id] += self.steps
            self._submit(worker_id)
        return self.metrics

    def _restart_worker(self, worker_id: int, error: BaseException) -> None:
        """:meth:`RayProcesses._restart`, counted in ``counters``; the call goes out once
        the replacement is built."""
        self.starting[self._restart(worker_id, error, self.counters)] = worker_id

    def close(self) -> None:
        """Kills the worker processes (calls in flight are dropped); shuts Ray down if this
        started it."""
        self.stopped = True
        self.pending.clear()
        self.starting.clear()
        self._shutdown()


class AgentWorkerPool(RayWorkerPool):
    """A :class:`RayWorkerPool` that acts for a run agent with a replay (ACER's workers,
    TAAC's collectors): the run's settings, the agent's learner, whose update count is the
    weights version.

    Args:
      agent: the run agent (``run_config``, ``learner`` with an ``updates`` variable,
        ``extra_state``: its replay).
      counters: the run's counters.
      num_workers: worker processes.
      steps: the environment steps of one call.
      env_factory: optional picklable ``(num_envs, seed) -> VectorEnv`` (tests).
    """

    def __init__(self, agent, counters, num_workers: int, steps: int, env_factory=None):
        run = agent.run_config
        super().__init__(
            num_workers, steps, counters.env_steps, run.total_steps, counters,
            address=run.ray_address, actor_cpus=run.ray_actor_cpus,
        )  # fmt: skip
        self.agent, self.learner, self.run = agent, agent.learner, run
        self._env_factory = host_env_factory(env_factory, group_size(run))

    @property
    def version(self) -> int:
        """The weights version: the learner's update count."""
        return int(self.learner.updates.numpy())
