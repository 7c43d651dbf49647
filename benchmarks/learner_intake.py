"""The IMPALA learner's intake: how fast it trains when unrolls come from memory, from
stub Ray actors that replay recorded unrolls, and from real Ray actors.

    python benchmarks/learner_intake.py [--configs=impala_cartpole,impala_atari_pong]
        [--actors=1,2,4] [--seconds=4 | --updates=N] [--repeats=3] [--quick] [--stub_env]
        [--frames=stacked,once]

For each flagfile in ``--configs`` (a shipped config's name or a path) one learner (the
flagfile's network, optimizer and update: ``ImpalaLearner.train_step``) runs the training
loop of ``ActorLearner.advance`` (take ``batch_unrolls`` unrolls, ``stack_unrolls``, one
update, publish the new weights) fed three ways:

* ``a`` memory: the flagfile's unrolls, recorded once before timing by an in-process actor
  and kept in memory: the learner's compute ceiling;
* ``b`` stub: ``RayActorPool``'s driver thread and queue over Ray actor processes that
  answer ``unroll(version, weights_ref)`` with those recorded unrolls (same shapes and
  dtypes; weights fetched by version as a real actor does, no environment, no network):
  what transport and batching cost the learner;
* ``c`` ray: the same pool over real ``ActorHost`` processes (``--backend=ray``: own
  network and environments).

``b`` and ``c`` run with each count of ``--actors``. ``e``, the env-only ceiling
(``benchmarks/ceiling.py``'s ``measure`` in this process, for ``--seconds``): the flagfile's
vector env of one actor (``make_vector_env`` with its ``--num_envs``, mode and settings, the
stub env where Pong is stubbed) stepped with random actions, no network; every row is also
given as a fraction of it (``of e``). Two more kinds of measurement give the
sizing terms without a learner (the unrolls are taken and dropped; a new weights version is
published every ``batch_unrolls`` of them, as in training): ``t`` (stub actors, each count
of ``--actors``: what Ray's transport delivers at most) and ``r1`` (one real actor: one
actor's rate).

``--frames`` says how the unrolls ship, each setting measured in turn within every repeat
(``e`` once for all): ``stacked``, as the actor made them, and ``once``, each frame of a
stacked-frame observation once (``ship_frames_once``,
:mod:`tfagents_vtrace.runtime.acting.frames`): the stub actors answer with the recorded
unrolls packed, the real ones pack theirs, the unroll source unpacks them for the learner
(and ``a`` unpacks them in its loop). Printed per setting: the MB per unroll and bytes per
agent step as shipped, a table and verdict each, then both side by side with Ray's delivery
(``t``); each config's first line also gives the thread CPU time of packing and of unpacking
one of its recorded unrolls.

Ray starts once; each config's actors are built once (the largest count of each kind) and
every measurement drives a new pool over the first N of them, so the measurements take turns
within each repeat and load from other processes hits them alike. A measurement warms up
for one update, then counts updates over ``--seconds`` (or ``--updates``); the actors' calls
still in flight are waited for before the next one starts. Printed: medians over
``--repeats`` of agent steps/s, the ratios b/a and c/a, the per-unroll transport cost (time
per unroll in b minus in a), the learner thread's wait for its unrolls, and for one actor
the serial bound ``1 / (1/a + 1/r1)`` (acting and learning taking turns on the CPU) beside
the overlapped one ``min(a, r1)``; the last line is JSON. The first line names the machine
(``benchmarks/machine.py``). The default run (both ``--frames`` settings) takes about 12
minutes on 2 cores.

ALE configs need the ``atari`` extra; without it an ALE config runs on a stub environment of
the same spaces (84x84x4 uint8 frames, 6 actions; ``--stub_env`` forces it) and the output
says so (the real actors' rate is then not the game's). Needs Ray (``pip install .[ray]``).
A bad flag ends with one line naming it and exit code 2.
"""

import time

START_TIME = time.time()

import argparse  # noqa: E402
import datetime  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
import ceiling as env_ceiling  # noqa: E402
from machine import machine_info, machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

ROOT = os.path.dirname(_BENCH)
CONFIG_DIR = os.path.join(ROOT, "tfagents_vtrace", "configs")
DEFAULT_CONFIGS = "impala_cartpole,impala_atari_pong"
STUB_ENV_ID = "LearnerIntakePongShaped-v0"
STACKED, ONCE = "stacked", "once"
"""The ``--frames`` settings: unrolls ship as the actor made them, or each frame once."""
SATURATED = 0.9
"""c/a at which the actors are said to saturate the learner."""


# ---------------------------------------------------------------------------- stub actors
class ReplayHost:
    """The body of a stub Ray actor: answers ``unroll(version, weights_ref)`` with recorded
    unrolls in turn, as :class:`~tfagents_vtrace.runtime.acting.ray_backend.ActorHost` answers
    with fresh ones (weights fetched when the version is newer, an ``info`` of the same
    keys); no environment, no network, no TensorFlow. ``recorded`` holds the unrolls of each
    ``--frames`` setting, :meth:`ship` picks one."""

    def __init__(self, recorded: dict, actor_id: int, env_restarts: int = 0):
        self.recorded, self.actor_id, self.env_restarts = recorded, int(actor_id), env_restarts
        self.weights_version, self.calls, self.frames = -1, 0, STACKED

    def ship(self, frames: str) -> None:
        self.frames = frames

    def pid(self) -> int:
        return os.getpid()

    def unroll(self, version: int, weights_ref: list) -> tuple[dict, dict]:
        start = time.perf_counter()
        if version > self.weights_version:
            import ray

            ray.get(weights_ref[0])
            self.weights_version = int(version)
        recorded = self.recorded[self.frames]
        unroll = recorded[self.calls % len(recorded)]
        self.calls += 1
        info = {"episode_returns": (), "episode_lengths": (), "actor_id": self.actor_id,
                "weights_version": self.weights_version, "env_restarts": self.env_restarts,
                "env_time": 0.0, "inference_time": 0.0,
                "weights_time": time.perf_counter() - start}  # fmt: skip
        return unroll, info


def pong_shaped_env_class():
    """A gymnasium env with Pong's spaces as the project makes them (``[84, 84, 4]`` uint8
    frames, 6 actions), stepping through 8 fixed random frames: the stand-in when the
    ``atari`` extra is missing. Built inside a function so that Ray pickles it by value."""
    import gymnasium as gym
    import numpy as np

    class PongShapedEnv(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (84, 84, 4), np.uint8)
        action_space = gym.spaces.Discrete(6)

        def __init__(self, episode_steps: int = 1000):
            self.frames = np.random.default_rng(0).integers(0, 256, (8, 84, 84, 4), np.uint8)
            self.episode_steps, self.t = episode_steps, 0

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return self.frames[0], {}

        def step(self, action):
            self.t += 1
            reward = float(self.np_random.random() < 0.01) * (1.0 if action % 2 else -1.0)
            truncated = self.t >= self.episode_steps
            return self.frames[self.t % 8], reward, False, truncated, {}

    return PongShapedEnv


def register_stub_env() -> None:
    import gymnasium as gym

    if STUB_ENV_ID not in gym.registry:
        gym.register(STUB_ENV_ID, entry_point=pong_shaped_env_class(), disable_env_checker=True)


def intake_actor_host(stub_env: bool):
    """``ActorHost`` whose :meth:`ship` sets how its unrolls ship (a ``--frames`` setting);
    with ``stub_env`` it registers the stub Pong env in its process first."""
    import dataclasses

    from tfagents_vtrace.runtime.acting.ray_backend import ActorHost

    class IntakeActorHost(ActorHost):
        def __init__(self, *args, **kwargs):
            if stub_env:
                register_stub_env()
            super().__init__(*args, **kwargs)

        def ship(self, frames: str) -> None:
            once = frames == ONCE
            self.actor.spec = dataclasses.replace(self.actor.spec, ship_frames_once=once)

    return IntakeActorHost


def pool_classes():
    """``(IntakePool, StubPool)``: ``RayActorPool`` whose ``start()`` drives actors built
    beforehand (:meth:`adopt`) and whose end leaves them alive for the next measurement;
    ``StubPool`` builds :class:`ReplayHost` actors."""
    from tfagents_vtrace.runtime.acting.ray_backend import RayActorPool

    if __name__ != "__main__":  # imported by path (tests): Ray pickles ReplayHost by value
        import ray.cloudpickle

        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])

    class IntakePool(RayActorPool):
        def __init__(self, handles: list, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.adopted = list(handles)

        def launch(self) -> None:
            self.handles = list(self.adopted)

        def _shutdown(self) -> None:  # the benchmark kills the actors at its end
            pass

    class StubPool(RayActorPool):
        host_class = ReplayHost

        def __init__(self, recorded_ref, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.recorded_ref = recorded_ref

        def host_args(self, actor_id: int) -> tuple:
            return (self.recorded_ref, actor_id)

    return IntakePool, StubPool


# ---------------------------------------------------------------------------- one config
class Bench:
    """One config's learner, recorded unrolls and Ray actors; :meth:`measure` runs one
    mode for one window and returns agent steps/s."""

    def __init__(self, path: str, args: argparse.Namespace, atari: bool):
        import numpy as np

        import tfagents_vtrace as tv
        from tfagents_vtrace.runtime.acting.actor import (
            Actor,
            ActorSpec,
            WeightStore,
            build_network,
        )
        from tfagents_vtrace.runtime.acting.frames import pack_unroll, unpack_unroll

        env_id = flagfile_value(path, "env")
        stub_env = bool(env_id and env_id.startswith("ALE/") and (args.stub_env or not atari))
        if stub_env:
            register_stub_env()
        configs = tv.make_configs(flagfile=path, env=STUB_ENV_ID if stub_env else None)
        self.name, self.args, self.stub_env = config_name(path), args, stub_env
        self.run, self.net_config = configs.run_config, configs.network_config
        run = self.run
        self.spec = ActorSpec(run.env_id, self.net_config, run.num_envs, run.unroll_length,
                              seed=run.seed, env_mode=run.env_mode,
                              policy_impl=run.policy_impl, env_groups=run.env_groups,
                              env_kwargs=run.env_kwargs)  # fmt: skip
        network = lambda: build_network(self.net_config, run.env_id, run.env_kwargs)  # noqa: E731
        learner_class = configs.spec.run_agent.Learner  # IMPALA's and A2C's: actor_learner
        self.learner = learner_class(configs.agent_config, network, None, 10**6, seed=0)
        self.initial_weights = self.learner.get_weights()
        recorder = Actor(self.spec, 0)
        recorder.set_weights(0, self.initial_weights)
        self.recorded = []
        while len(self.recorded) < max(2, run.batch_unrolls):
            item = recorder.unroll()
            if item is not None:
                self.recorded.append(item[0])
        recorder.close()
        passes, start = 5, time.thread_time()
        for _ in range(passes):
            self.packed = [pack_unroll(u) for u in self.recorded]
        packed = time.thread_time()
        for _ in range(passes):
            [unpack_unroll(u) for u in self.packed]
        per_unroll = 1e3 / (passes * len(self.recorded))
        self.frames_ms = {  # CPU ms per unroll of shipping frames once: pack, unpack
            "pack": per_unroll * (packed - start),
            "unpack": per_unroll * (time.thread_time() - packed),
        }
        self.store, self.version = WeightStore(), 0
        self.steps_per_unroll = run.unroll_length * run.num_envs
        shipped = {STACKED: self.recorded, ONCE: self.packed}
        self.unroll_bytes = {  # as shipped, the mean over the recorded unrolls
            frames: float(np.mean([sum(leaf.nbytes for leaf in _leaves(u)) for u in unrolls]))
            for frames, unrolls in shipped.items()
        }
        self.batches = [self.stack(self.recorded[i:] + self.recorded[:i])
                        for i in range(len(self.recorded))]  # fmt: skip
        self.learner.train_step(self.batches[0])  # traces the update
        self.stubs, self.reals = [], []

    def stack(self, unrolls: list) -> dict:
        from tfagents_vtrace.runtime.acting.unroll_sources import stack_unrolls

        return stack_unrolls(unrolls[: self.run.batch_unrolls])

    def describe(self) -> str:
        run, obs = self.run, self.recorded[0]["observation"]
        shape = getattr(obs, "shape", None)
        env = run.env_id
        if self.stub_env:
            why = "--stub_env" if self.args.stub_env else "the atari extra is not installed"
            env += f" (STUB ENV instead of ALE/Pong-v5, {why}: Pong's spaces, no emulator)"
        return (
            f"{self.name}: {env}, torso {self.net_config.torso}, {run.num_envs} envs x "
            f"unroll {run.unroll_length} = {self.steps_per_unroll} agent steps per unroll, "
            f"{run.batch_unrolls} unroll(s) per update, queue {run.queue_capacity}, "
            f"policy_impl {run.policy_impl}; observation {shape} "
            f"{getattr(obs, 'dtype', '')}; per unroll as shipped: "
            + ", ".join(f"{frames} {n / 1e6:.2f} MB" for frames, n in self.unroll_bytes.items())
            + f"; shipping frames once costs {self.frames_ms['pack']:.1f} ms (pack) + "
            f"{self.frames_ms['unpack']:.1f} ms (unpack) of CPU per unroll"
        )

    def start_actors(self, n_stub: int, n_real: int) -> None:
        """Builds the stub and real Ray actors (together) and waits until all are built."""
        import ray

        from tfagents_vtrace.runtime.acting.ray_backend import RayActorPool

        _, StubPool = pool_classes()
        recorded_ref = ray.put({STACKED: self.recorded, ONCE: self.packed})
        stub = StubPool(recorded_ref, self.spec, n_stub, self.store, None, None)
        real = RayActorPool(self.spec, n_real, self.store, None, None)
        real.host_class = intake_actor_host(self.stub_env)
        self.stubs = [stub._new_actor(i) for i in range(n_stub)]
        self.reals = [real._new_actor(i) for i in range(n_real)]
        ray.get([h.pid.remote() for h in self.stubs + self.reals])

    def kill_actors(self) -> None:
        import ray

        for handle in self.stubs + self.reals:
            ray.kill(handle, no_restart=True)
        self.stubs, self.reals = [], []

    def publish(self) -> None:
        self.version += 1
        self.store.publish(self.version, self.learner.get_weights())

    def measure(self, mode: str, actors: int, frames: str = STACKED) -> tuple[float, float]:
        """``(agent steps/s, learner-thread ms waiting per unroll)`` of one window of
        ``mode``: "a" (memory), "e" (one actor's environments alone: the env-only ceiling),
        "b" / "t" (stub actors with / without the learner), "c" / "r" (real actors with /
        without it), over ``actors`` Ray actors, the unrolls shipped as ``frames`` says (in
        "a", "once" unpacks the packed unrolls in the learner's loop)."""
        if mode == "e":
            run = self.run
            result = env_ceiling.measure(
                run.env_id, run.num_envs, 1, mode=run.env_mode, env_kwargs=run.env_kwargs,
                seconds=self.args.seconds,
            )  # fmt: skip
            return result["sps"], 0.0
        self.learner.network.set_weights(self.initial_weights)  # no drift across windows
        if mode == "a" and frames == STACKED:
            batches = iter(self.batches * 10**6)
            return self._window(lambda: next(batches), train=True)
        if mode == "a":
            from tfagents_vtrace.runtime.acting.frames import unpack_unroll

            unrolls = iter(self.packed * 10**6)
            n = self.run.batch_unrolls
            take = lambda: self.stack([unpack_unroll(next(unrolls)) for _ in range(n)])  # noqa: E731
            return self._window(take, train=True)
        import ray

        from tfagents_vtrace.runtime.acting.unroll_sources import QueueSource

        IntakePool, _ = pool_classes()
        handles = (self.stubs if mode in ("b", "t") else self.reals)[:actors]
        ray.get([h.ship.remote(frames) for h in handles])
        stop = threading.Event()
        unrolls: queue.Queue = queue.Queue(maxsize=self.run.queue_capacity)
        pool = IntakePool(handles, self.spec, actors, self.store, unrolls, stop)
        source = QueueSource([pool], unrolls, self.store, stop)
        self.publish()
        source.start(self.version, self.store.get()[1])
        take = lambda: self.stack([source.next()[0] for _ in range(self.run.batch_unrolls)])  # noqa: E731
        try:
            return self._window(take, train=mode in ("b", "c"))
        finally:
            source.close()
            if pool.error is not None:
                raise pool.error
            ray.get([h.pid.remote() for h in handles])  # the calls in flight have ended

    def _window(self, take, train: bool) -> tuple[float, float]:
        """One warm-up update, then updates until ``--seconds`` (or ``--updates``) pass."""
        args, waited = self.args, [0.0]

        def update():
            start = time.perf_counter()
            batch = take()
            waited[0] += time.perf_counter() - start
            if train:
                self.learner.train_step(batch)
            self.publish()

        update()
        updates, waited[0], start = 0, 0.0, time.perf_counter()
        while True:
            update()
            updates += 1
            elapsed = time.perf_counter() - start
            if updates >= args.updates if args.updates else elapsed >= args.seconds:
                break
        unrolls = updates * self.run.batch_unrolls
        return unrolls * self.steps_per_unroll / elapsed, 1e3 * waited[0] / unrolls


def _leaves(nest):
    if isinstance(nest, dict):
        for value in nest.values():
            yield from _leaves(value)
    elif isinstance(nest, tuple | list):
        for value in nest:
            yield from _leaves(value)
    else:
        yield nest


# ---------------------------------------------------------------------------- report
ROWS = (("a", "memory: the learner's ceiling"), ("e", "env only: one actor's envs"),
        ("t", "stub actors, no learner"),
        ("r", "real actor, no learner"), ("b", "stub actors + learner"),
        ("c", "real actors + learner"))  # fmt: skip


def summarize(bench: Bench, runs: dict, waits: dict, actors: list[int], frames: str) -> dict:
    """Medians, ratios to ``a``, the transport cost per unroll and the sizing terms of the
    ``frames`` setting's runs."""
    med = {key: statistics.median(values) for key, values in runs.items()}
    wait = {key: statistics.median(values) for key, values in waits.items()}
    a, r1 = med["a"], med["r1"]
    per_unroll_ms = {key: 1e3 * bench.steps_per_unroll / value for key, value in med.items()}
    ratios = {f"{m}/a": {n: med[f"{m}{n}"] / a for n in actors} for m in ("b", "c")}
    saturating = next((n for n in actors if med[f"c{n}"] / a >= SATURATED), None)
    return {
        "env_id": bench.run.env_id,
        "stub_env": bench.stub_env,
        "steps_per_unroll": bench.steps_per_unroll,
        "batch_unrolls": bench.run.batch_unrolls,
        "frames": frames,
        "unroll_bytes": bench.unroll_bytes[frames],
        "bytes_per_agent_step": bench.unroll_bytes[frames] / bench.steps_per_unroll,
        "frames_once_cpu_ms_per_unroll": bench.frames_ms,
        "runs": runs,
        "medians": med,
        "ms_per_unroll": per_unroll_ms,
        "learner_wait_ms_per_unroll": wait,
        "ratios": ratios,
        "transport_ms_per_unroll": {n: per_unroll_ms[f"b{n}"] - per_unroll_ms["a"] for n in actors},
        "transport_ceiling_unrolls_per_s": {
            n: med[f"t{n}"] / bench.steps_per_unroll for n in actors
        },
        "env_only_ceiling": med["e"],
        "of_env_only": {key: env_ceiling.fraction(value, med["e"]) for key, value in med.items()},
        "actors_to_saturate_estimate": a / r1,
        "serial_bound_one_actor": 1.0 / (1.0 / a + 1.0 / r1),
        "overlapped_bound_one_actor": min(a, r1),
        "actors_saturating_measured": saturating,
        "best_c_actors": max(actors, key=lambda n: med[f"c{n}"]),
    }


def print_table(name: str, s: dict, actors: list[int]) -> None:
    med, ms, wait = s["medians"], s["ms_per_unroll"], s["learner_wait_ms_per_unroll"]
    print(
        f"| {name} | actors | median agent steps/s | of a | of e | ms per unroll | transport "
        "ms per unroll (b - a) | learner waits ms per unroll | runs |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for mode, what in ROWS:
        for n in ("",) if mode in "ae" else (1,) if mode == "r" else actors:
            key = f"{mode}{n}"
            transport = f"{s['transport_ms_per_unroll'][n]:.2f}" if mode == "b" else "-"
            waits = f"{wait[key]:.2f}" if mode in "abc" else "-"
            of_e = env_ceiling.format_fraction(s["of_env_only"][key])
            print(
                f"| {key}: {what} | {n or '-'} | {med[key]:,.0f} | {med[key] / med['a']:.2f} "
                f"| {of_e} | {ms[key]:.2f} | {transport} | {waits} | {len(s['runs'][key])} |"
            )


def verdict(name: str, s: dict, actors: list[int], cores: int) -> str:
    """The sizing terms and what bounds the intake, in one paragraph with the numbers."""
    med, a = s["medians"], s["medians"]["a"]
    counts = "/".join(str(n) for n in actors)
    c_ratios = " / ".join(f"{s['ratios']['c/a'][n]:.2f}" for n in actors)
    b_ratios = " / ".join(f"{s['ratios']['b/a'][n]:.2f}" for n in actors)
    ceiling = " / ".join(f"{v:,.0f}" for v in s["transport_ceiling_unrolls_per_s"].values())
    transport = statistics.median(s["transport_ms_per_unroll"].values())
    line = (
        f"{name}: the learner takes {a:,.0f} agent steps/s from memory "
        f"({s['ms_per_unroll']['a']:.1f} ms per unroll); one real Ray actor alone makes "
        f"{med['r1']:,.0f}, so a / r1 = {s['actors_to_saturate_estimate']:.1f}: "
        f"{max(1, math.ceil(s['actors_to_saturate_estimate']))} actor(s) would saturate it; "
        f"stub actors without a learner deliver {ceiling} unrolls/s at {counts} "
        f"actors (the transport ceiling); b/a {b_ratios} and c/a {c_ratios} at {counts} "
        f"actors; transport costs the learner {transport:.2f} ms per unroll (b - a, median "
        f"over actor counts). One real actor: c1 {med['c1']:,.0f} against "
        f"{s['serial_bound_one_actor']:,.0f} if acting and learning took turns and "
        f"{s['overlapped_bound_one_actor']:,.0f} if they overlapped. One actor's environments "
        f"alone, random actions and no network, step {med['e']:,.0f} agent steps/s (the "
        f"env-only ceiling e): c at {counts} actors is "
        + " / ".join(env_ceiling.format_fraction(s["of_env_only"][f"c{n}"]) for n in actors)
        + " of it."
    )
    if s["actors_saturating_measured"] is not None:
        n = s["actors_saturating_measured"]
        return line + f" Measured: {n} actor(s) saturate the learner (c/a >= {SATURATED})."
    best = s["best_c_actors"]
    c_best = f"c{best} {med[f'c{best}']:,.0f} = {s['ratios']['c/a'][best]:.2f} of a"
    t_n = max(actors, key=lambda n: med[f"t{n}"])
    t_best = med[f"t{t_n}"]
    if t_best < SATURATED * a:
        return line + (
            f" Measured: no actor count saturates it (best {c_best}): Ray's transport bounds "
            f"the intake, as even stub actors with no learner deliver at most {t_best:,.0f} "
            f"agent steps/s ({t_best / a:.2f} of a, {s['ms_per_unroll'][f't{t_n}']:.2f} ms per "
            f"unroll call at {t_n} actor(s)) and the real actors come close to the stubs "
            f"(c{best}/b{best} {med[f'c{best}'] / med[f'b{best}']:.2f}). A Ray call costs about "
            "the same whatever it carries, so the agent steps per unroll (environments x "
            f"unroll length) set the intake; on {cores} cores the transport's CPU is the "
            "learner's too."
        )
    return line + (
        f" Measured: no actor count saturates it (best {c_best}), while the transport alone "
        f"delivers {t_best / a:.0f}x a and the stubs keep b/a at {b_ratios}: acting is the "
        f"bound, and on {cores} cores the actors and the learner share the CPU, so more "
        "actors cannot add it: the bound is the machine."
    )


def print_frames(name: str, summaries: dict, actors: list[int]) -> None:
    """The ``--frames`` settings side by side: what an unroll ships and what Ray delivers."""
    counts = " / ".join(str(n) for n in actors)
    print(
        f"| {name}: frames | MB per unroll | bytes per agent step | t ({counts}): Ray's "
        f"delivery, agent steps/s | unrolls/s | a | r1 | b ({counts}) | c ({counts}) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for frames, s in summaries.items():
        med = s["medians"]
        t, b, c = (" / ".join(f"{med[f'{m}{n}']:,.0f}" for n in actors) for m in "tbc")
        ceiling = " / ".join(f"{v:,.0f}" for v in s["transport_ceiling_unrolls_per_s"].values())
        print(f"| {frames} | {s['unroll_bytes'] / 1e6:.2f} | {s['bytes_per_agent_step']:,.0f} | "
              f"{t} | {ceiling} | {med['a']:,.0f} | {med['r1']:,.0f} | {b} | {c} |")  # fmt: skip


# ---------------------------------------------------------------------------- main
def config_file(name: str) -> str | None:
    """The flagfile ``name`` (a path, or a shipped config's name); None if neither exists."""
    shipped = os.path.join(CONFIG_DIR, name if name.endswith(".cfg") else f"{name}.cfg")
    return next((p for p in (name, shipped) if os.path.isfile(p)), None)


def config_name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def flagfile_value(path: str, key: str) -> str | None:
    """The last ``--key`` of a flagfile, as text (None if it has none), nested flagfiles
    included (``tfagents_vtrace.utils.flagfiles``, the project's flagfile reader; the
    settings are validated later, when TensorFlow is imported anyway).

    Raises:
      ValueError: a flagfile that cannot be read, or a line that is not a flag.
    """
    from tfagents_vtrace.utils.flagfiles import flag_texts, flagfile_lines

    return flag_texts(flagfile_lines(path)).get(key)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit code 2
        self.exit(2, f"error: {message}\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = _Parser(description=__doc__.split("\n")[0])
    p.add_argument("--configs", default=DEFAULT_CONFIGS, help="IMPALA flagfiles: shipped "
                   "config names or paths")  # fmt: skip
    p.add_argument("--actors", default="1,2,4", help="Ray actor counts of b and c")
    p.add_argument("--seconds", type=float, default=4.0, help="timed seconds per measurement")
    p.add_argument("--updates", type=int, default=0, help="timed updates per measurement "
                   "(instead of --seconds)")  # fmt: skip
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smoke test: 1 actor, 1 s, 1 repeat")
    p.add_argument(
        "--stub_env", action="store_true", help="Pong on the stub env even with the atari extra"
    )
    p.add_argument("--frames", default=f"{STACKED},{ONCE}", help="how unrolls ship, each "
                   f"setting measured in turn: {STACKED} (as made) and/or {ONCE} (each frame "
                   "once, ship_frames_once)")  # fmt: skip
    args = p.parse_args(argv)
    args.frames = list(dict.fromkeys(f for f in args.frames.split(",") if f))
    if not args.frames or not set(args.frames) <= {STACKED, ONCE}:
        p.error(f"--frames: expected {STACKED} and/or {ONCE}, received {args.frames!r}")
    names, args.configs = [c for c in args.configs.split(",") if c], []
    for name in names:
        path = config_file(name)
        if path is None:
            p.error(f"--configs: no flagfile and no shipped config {name!r} (in {CONFIG_DIR})")
        try:
            agent = flagfile_value(path, "agent")
        except ValueError as e:
            p.error(f"--configs: {name!r}: {e}")
        if agent != "impala":
            p.error(f"--configs: {name!r} is not an IMPALA config (--agent=impala)")
        args.configs.append(path)
    if not args.configs:
        p.error("--configs: expected at least one config")
    try:
        args.actors = sorted({int(n) for n in args.actors.split(",") if n})
    except ValueError:
        p.error(f"--actors: expected comma-separated ints >= 1, received {args.actors!r}")
    if not args.actors or args.actors[0] < 1:
        p.error("--actors: expected comma-separated ints >= 1")
    if not args.seconds > 0:
        p.error(f"--seconds: expected > 0, received {args.seconds}")
    if args.updates < 0:
        p.error(f"--updates: expected >= 0, received {args.updates}")
    if args.repeats < 1:
        p.error(f"--repeats: expected >= 1, received {args.repeats}")
    if args.quick:
        args.actors, args.seconds, args.repeats = [1], 1.0, 1
    if importlib.util.find_spec("ray") is None:
        p.error("ray is not installed (pip install .[ray])")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    info = machine_info()
    print(machine_line(info), flush=True)
    load = os.getloadavg() if hasattr(os, "getloadavg") else ()
    today = datetime.date.today().isoformat()
    window = f"{args.updates} updates" if args.updates else f"{args.seconds:g} s"
    print(f"date {today}; load average at start {' '.join(f'{x:.2f}' for x in load)}; "
          f"{window} per measurement, {args.repeats} repeat(s), actors {args.actors}",
          flush=True)  # fmt: skip
    atari = all(importlib.util.find_spec(m) is not None for m in ("ale_py", "cv2"))
    import ray

    from tfagents_vtrace.runtime.acting.ray_backend import init_local_ray

    n_max = max(args.actors)
    init_local_ray(max(os.cpu_count() or 1, 2 * n_max), log_to_driver=False)
    results = {}
    try:
        for path in args.configs:
            started = time.perf_counter()
            bench = Bench(path, args, atari)
            name = bench.name
            print(bench.describe(), flush=True)
            bench.start_actors(n_max, n_max)
            print(f"{name}: learner traced, unrolls recorded, {n_max} stub + {n_max} real Ray "
                  f"actors built in {time.perf_counter() - started:.1f} s", flush=True)  # fmt: skip
            modes = [("a", 0), ("e", 0), *(("t", n) for n in args.actors), ("r", 1)]
            modes += [(m, n) for m in ("b", "c") for n in args.actors]
            runs = {frames: {} for frames in args.frames}
            waits = {frames: {} for frames in args.frames}
            try:
                for repeat in range(args.repeats):
                    for mode, n in modes:
                        key = f"{mode}{n or ''}"
                        # e steps environments only: one window serves every setting
                        for frames in args.frames[:1] if mode == "e" else args.frames:
                            value, wait = bench.measure(mode, n, frames)
                            for shared in args.frames if mode == "e" else [frames]:
                                runs[shared].setdefault(key, []).append(value)
                                waits[shared].setdefault(key, []).append(wait)
                            print(f"{name} repeat {repeat}: {key} ({frames}): {value:,.0f} "
                                  f"agent steps/s, {wait:.2f} ms waiting per unroll",
                                  flush=True)  # fmt: skip
            finally:
                bench.kill_actors()
            cores = info["usable_cores"] or info["cores"]
            results[name] = {}
            for frames in args.frames:
                summary = summarize(bench, runs[frames], waits[frames], args.actors, frames)
                print_table(f"{name} ({frames})", summary, args.actors)
                print(verdict(f"{name} ({frames})", summary, args.actors, cores))
                results[name][frames] = summary
            print_frames(name, results[name], args.actors)
    finally:
        ray.shutdown()
    print(json.dumps({"configs": results, "machine": info, "date": today, "load_average": load,
                      "seconds": args.seconds, "updates": args.updates,
                      "repeats": args.repeats, "actors": args.actors,
                      "wall_time": time.time() - START_TIME}))  # fmt: skip


if __name__ == "__main__":
    main()
