"""The Ray actor backend: real CartPole training with Ray actor processes, env failures,
clean shutdown. Skipped when Ray is not installed (``pip install .[ray]``)."""

import dataclasses
import json
import os
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from tests.ray_kill import kill_process_0
from tests.runtime.test_actor import FailingVectorEnv, short_cartpole
from tfagents_vtrace.agents import get_agent
from tfagents_vtrace.envs.failures import EnvFailure
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.acting import ray_backend, unroll_sources
from tfagents_vtrace.runtime.config import RunConfig
from tfagents_vtrace.runtime.driver import make_driver

try:
    import ray
except ImportError:
    ray = None

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("ray_backend")

AGENT = get_agent("impala")
NET = NetworkConfig(hidden_sizes=(16,))
requires_ray = pytest.mark.skipif(ray is None, reason="ray is not installed (pip install .[ray])")


@pytest.fixture(scope="module")
def ray_session():
    if ray is None:
        pytest.skip("ray is not installed (pip install .[ray])")
    """One local Ray for the module (its workers start in this directory, so ``tests`` is
    importable by the actors that unpickle the test's env factory)."""
    started = not ray.is_initialized()
    if started:
        ray_backend.init_local_ray(2, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture
def pools(monkeypatch):
    """Records every RayActorPool the actor-learner starts (to probe its actors afterwards)."""
    started = []
    original = ray_backend.RayActorPool.start

    def start(self):
        started.append(self)
        original(self)

    monkeypatch.setattr(ray_backend.RayActorPool, "start", start)
    return started


def _run(total_steps, num_actors, **kw):
    return RunConfig(total_steps=total_steps, num_envs=8, unroll_length=8, eval_episodes=2,
                     export_policy=False, backend="ray", num_actors=num_actors,
                     log_every_s=0.05, **kw)  # fmt: skip


def _rows(logdir):
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f]


def _assert_actors_dead(pool):
    for handle in pool.handles:  # ray.kill is asynchronous: a call may still be answered
        deadline = time.monotonic() + 10
        with pytest.raises(ray.exceptions.RayActorError):
            while time.monotonic() < deadline:
                ray.get(handle.pid.remote(), timeout=30)
                time.sleep(0.1)
    deadline = time.monotonic() + 10  # killed actors give their CPUs back
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2


# The two agents of the actor-learner; A2C in make test-long (the suite is near its budget).
@pytest.mark.parametrize("name", ["impala", pytest.param("a2c", marks=pytest.mark.long)])
def test_cartpole_training_with_two_ray_actors(tmp_path, ray_session, pools, name):
    agent = get_agent(name)
    trainer = make_driver(_run(6144, 2), agent, agent.Config(), NET, str(tmp_path))
    final = trainer.run()
    assert final["step"] >= 6144 and final["updates"] == 6144 // 64
    assert final["episodes"] > 0 and final["eval_return"] > 0
    assert set(trainer.counters.actor_restarts) == {0, 1}, "unrolls must come from both Ray actors"
    rows = _rows(str(tmp_path))
    steps = [row["step"] for row in rows]
    assert steps == sorted(set(steps)) and steps[-1] == final["step"]
    lags = [row["policy_lag"] for row in rows]
    assert all(lag >= 0 for lag in lags)
    # Two actors racing one learner through a queue of 2: some unrolls are behind.
    assert max(lags) > 0
    # The Ray actors' timings reach the rows.
    assert any(row["time_env"] > 0 and row["time_inference"] > 0 for row in rows)
    (pool,) = pools
    assert pool.error is None and not pool.is_alive()
    _assert_actors_dead(pool)


def test_ray_actor_whose_env_raises_is_recreated(tmp_path, ray_session, pools):
    # The factory is unpickled in the actor process: its env raises on every 40th step there,
    # twice (and at most twice in the learner's evaluation, which retries 3 times).
    FailingVectorEnv.calls = FailingVectorEnv.failures = 0
    factory = lambda n, seed: FailingVectorEnv(short_cartpole(n, seed, 50), 40, max_failures=2)
    trainer = make_driver(_run(2048, 1), AGENT, AGENT.Config(), NET, str(tmp_path),
                      env_factory=factory)  # fmt: skip
    final = trainer.run()
    assert final["step"] >= 2048
    assert final["env_restarts"] >= 2  # 32 unrolls x 8 steps, plus the dropped partial ones
    assert _rows(str(tmp_path))[-1]["env_restarts"] == final["env_restarts"]
    _assert_actors_dead(pools[0])


class StripHost(ray_backend.ActorHost):
    """An ``ActorHost`` whose process knows the frame-stack test environment."""

    def __init__(self, *args, **kwargs):
        import tests.runtime.test_frames  # noqa: F401 - registers StackedStrip-v0

        super().__init__(*args, **kwargs)


def test_ray_actors_ship_frames_once_and_the_learner_stacks_them(ray_session, monkeypatch):
    """A Ray actor of a frame-stack environment sends each frame once (under half the
    bytes), and the pool's thread stacks them again: the unroll source gives the learner the
    stacks the environment made."""
    import queue
    import threading

    from tests.runtime.test_frames import STRIP_ID, assert_strip_stacks
    from tfagents_vtrace.runtime.acting import frames
    from tfagents_vtrace.runtime.acting.actor import ActorSpec, WeightStore, build_network

    received = []
    real_unpack = frames.unpack_unroll

    def unpack_unroll(unroll):
        received.append((unroll["observation"], real_unpack(unroll)))
        return received[-1][1]

    monkeypatch.setattr(ray_backend, "unpack_unroll", unpack_unroll)
    spec = ActorSpec(STRIP_ID, NET, num_envs=4, unroll_length=16, ship_frames_once=True)
    store, unrolls, stop = WeightStore(), queue.Queue(maxsize=2), threading.Event()
    pool = ray_backend.RayActorPool(spec, 1, store, unrolls, stop)
    pool.host_class = StripHost
    source = unroll_sources.QueueSource([pool], unrolls, store, stop)
    source.start(0, build_network(NET, STRIP_ID).get_weights())
    try:
        taken = [source.next()[0] for _ in range(4)]
    finally:
        source.close()
    assert [unroll for _, unroll in received[:4]] == taken  # stacked as they arrived
    for packed, unroll in received:
        assert isinstance(packed, frames.PackedFrames)
        assert 2 * packed.nbytes < unroll["observation"].nbytes
        assert_strip_stacks(unroll["observation"], unroll["first"])


def _saved_steps(logdir) -> int:
    return int(tf.train.latest_checkpoint(os.path.join(logdir, "checkpoints")).split("-")[-1])


def test_an_impala_actor_dying_past_its_limit_ends_the_run_with_a_checkpoint(
    tmp_path, ray_session, pools, monkeypatch
):
    """A death past the limit (0 here: the first) ends the run through ``RayWorkerLost``, an
    ``EnvFailure``: the driver saves the learner's newest state first, and the error is one
    line naming the actor and what to do (``tfv-train`` prints it, exit 1)."""
    monkeypatch.setattr(ray_backend, "RESTART_LIMIT", 0)
    trainer = make_driver(_run(10**6, 1), AGENT, AGENT.Config(), NET, str(tmp_path))
    seen = kill_process_0(trainer, ray, after_env_steps=512, times=1,
                          pool=lambda trainer: trainer.agent.source.threads[0])  # fmt: skip
    with pytest.raises(ray_backend.RayWorkerLost) as lost:
        trainer.run()
    message = str(lost.value)
    assert isinstance(lost.value, EnvFailure) and "\n" not in message
    assert message.startswith("Ray actor 0 died 1 time within 300 s (at most 0 replacements")
    assert "run the same command to resume" in message and "ActorDiedError: " in message
    assert ".." not in message
    step = trainer.counters.env_steps
    assert step >= seen["steps"][0] >= 512 and _saved_steps(tmp_path) == step
    (pool,) = pools
    assert pool.actor_restarts == [0] and not pool.is_alive()
    _assert_actors_dead(pool)


def test_a3c_worker_deaths_count_in_a_window_and_past_it_end_with_a_checkpoint(
    tmp_path, ray_session, monkeypatch
):
    """A dead A3C worker's rollout gives its claimed steps back and the worker is replaced;
    the death after the limit (1 here) within the window ends the run after a checkpoint of
    the newest state, every claim still out being a call in flight."""
    from tfagents_vtrace.agents.a3c import A3CConfig

    monkeypatch.setattr(ray_backend, "RESTART_LIMIT", 1)
    closing = {}
    close = ray_backend.RayWorkerPool.close

    def record_close(self):
        closing.update(claimed=self.budget.claimed, pending=len(self.pending))
        close(self)

    monkeypatch.setattr(ray_backend.RayWorkerPool, "close", record_close)
    a3c = get_agent("a3c")
    run = RunConfig(env_id="CartPole-v1", total_steps=10**6, num_envs=2, eval_episodes=2,
                    export_policy=False, log_every_s=0.05, backend="ray")  # fmt: skip
    trainer = make_driver(run, a3c, A3CConfig(num_workers=2, t_max=5), NET, str(tmp_path))
    seen = kill_process_0(trainer, ray, after_env_steps=200, times=2)
    with pytest.raises(ray_backend.RayWorkerLost, match="^A3C Ray worker 0 died 2 times within"):
        trainer.run()
    source, step = trainer.agent.source, trainer.counters.env_steps
    assert source.actor_restarts == [1, 0] and trainer.counters.env_restarts == 1
    assert step >= seen["steps"][1] > seen["steps"][0] >= 200  # trained on between the deaths
    assert _saved_steps(tmp_path) == step
    assert closing["claimed"] == step + 10 * closing["pending"]  # the dead calls' went back
    _assert_actors_dead(source)


def _niceness() -> int:
    return os.nice(0)


def test_a_private_ray_runs_its_workers_at_niceness_0(ray_session):
    """Ray's default, 15, left the actors a few percent of a core beside a busy learner or
    any other process on the machine (init_local_ray)."""
    assert ray.get(ray.remote(_niceness).remote(), timeout=120) == 0


class _BlasProbe(ray_backend.HostProcess):
    def blas_threads(self) -> list[int]:
        import threadpoolctl

        info = threadpoolctl.threadpool_info()
        return sorted({i["num_threads"] for i in info if i["user_api"] == "blas"})


def test_a_ray_host_acts_with_one_blas_thread(ray_session):
    """A host started with OpenBLAS at 2 threads limits numpy's pool to one thread for its
    life (utils/blas.py)."""
    pytest.importorskip("threadpoolctl")
    env = {"env_vars": {"OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": "2"}}
    probe = ray.remote(_BlasProbe).options(runtime_env=env).remote()
    try:
        assert ray.get(probe.blas_threads.remote(), timeout=120) == [1]
    finally:
        ray.kill(probe)


@requires_ray
def test_ray_backend_needs_an_actor():
    with pytest.raises(ValueError, match="num_actors"):
        ray_backend.check_run_config(_run(64, 0))


def test_importing_the_runtime_does_not_import_ray_and_missing_ray_says_how_to_install():
    code = (
        "import sys\n"
        "import tfagents_vtrace.runtime.acting.ray_backend as rb\n"
        "assert 'ray' not in sys.modules, 'importing the backend imported ray'\n"
        "sys.modules['ray'] = None  # as if it were not installed\n"
        "try:\n"
        "    rb.import_ray()\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install .[ray]" in out.stdout


def test_ray_actors_play_a_game_of_the_users_own(tmp_path, ray_session, pools):
    """A game of many agents given as a function (registered in this process only, under a
    ``user/`` id) is made by the Ray actors' own processes: the pool hands them its
    registration. Each agent's episode is counted: a plays 6 steps, b 3."""
    pytest.importorskip("pettingzoo")
    from tests import games
    from tfagents_vtrace.envs.user_envs import resolve_env

    env_id = resolve_env(games.make_relay)
    agent = get_agent("impala")
    run = _run(1024, 2, env_id=env_id)
    trainer = make_driver(run, agent, agent.Config(), NET, str(tmp_path))
    final = trainer.run()
    assert final["step"] >= 1024 and final["eval_length"] == 4.5
    assert set(trainer.counters.actor_restarts) == {0, 1}
    assert final["episodes"] > 0 and set(_rows(str(tmp_path))[-1]) >= {"episode_length"}
    (pool,) = pools
    assert pool.error is None


def test_ray_actors_play_the_snapshots_of_a_self_play_run(tmp_path, ray_session, pools):
    """Self-play on Ray: each actor's process holds a copy of the run's snapshot pool, built
    with the pool of the start (step 0) and brought up to date by version as the learner
    adds snapshots; the run trains, evaluates against both fixed opponents and resumes."""
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    import tfagents_vtrace as tv
    from tests.runtime.test_self_play import connect_four

    seen = []  # each row: the snapshot steps every Ray actor's pool holds
    started = []  # the same at the step-0 checkpoint of a new run: before any update

    def actor_pools():
        return [ray.get(h.snapshot_steps.remote(), timeout=60) for h in pools[-1].handles]

    class Probe:
        def on_row(self, row):
            try:
                seen.append(actor_pools())
            except ray.exceptions.RayActorError:  # the final row: the actors have ended
                pass

        def on_checkpoint(self, step, path):
            if step == 0:  # the actors are built; the learner has added no snapshot yet
                started.append(actor_pools())

    logdir = str(tmp_path / "run")
    kw = dict(num_envs=8, unroll_length=16, hidden_sizes=(16,), eval_episodes=2,
              eval_every=10**6, self_play_every=256, self_play_pool=3, self_play_fixed=0.5,
              backend="ray", num_actors=2, log_every_s=0.05, verbose=0, export=False,
              callbacks=[Probe()])  # fmt: skip
    final = tv.train("impala", env=connect_four, logdir=logdir, total_steps=2048, **kw)
    assert final["self_play_snapshots"] == 3 and "eval_oldest_win_rate" in final
    assert seen and all(len(actors) == 2 for actors in seen)
    # the actors' first pools are the pool of the start: a new run's, step 0 only
    assert started == [[[0], [0]]], started
    newest = max(max(steps) for actors in seen for steps in actors)
    assert newest >= 1024, seen  # later snapshots reached the actors' processes
    assert all(steps[0] == 0 and len(steps) <= 3 for actors in seen for steps in actors)
    rows = len(seen)
    again = tv.train("impala", env=connect_four, logdir=logdir, total_steps=3072, **kw)
    assert again["resumed"] and again["step"] >= 3072 and len(seen) > rows
    resumed = seen[rows]  # the restored pool: step 0 and the newest of the first run
    assert all(steps[0] == 0 and steps[-1] >= 1024 for steps in resumed), resumed
    assert pools[-1].error is None


def test_ray_actors_step_whole_games_of_two_groups(tmp_path, ray_session, pools):
    """A game of two groups (agents of different spaces, b leaving early) on Ray: each actor
    process steps whole games with one actor per group, and each result feeds both groups'
    learners. Both actors contribute; a killed process is replaced with new games and the run
    goes on; each group's policy is exported."""
    pytest.importorskip("pettingzoo")
    from tests import games
    from tfagents_vtrace.envs.user_envs import resolve_env

    run = dataclasses.replace(_run(4096, 2, env_id=resolve_env(games.make_uneven)),
                              export_policy=True)  # fmt: skip
    trainer = make_driver(run, AGENT, AGENT.Config(), NET, str(tmp_path))
    seen = kill_process_0(trainer, ray, after_env_steps=1024, times=1, pool=lambda _: pools[0])
    final = trainer.run()
    assert final["step"] >= 4096 and final["eval_length"] == 4.5  # a plays 6 steps, b 3
    assert sorted(os.listdir(tmp_path / "policy")) == ["a", "b"]
    rows = _rows(str(tmp_path))
    assert any("a/loss" in row and "b/loss" in row for row in rows)
    (pool,) = pools
    assert len(seen["pids"]) == 1 and pool.actor_restarts == [1, 0]
    assert set(trainer.counters.actor_restarts) == {0, 1}, "unrolls from both Ray actors"
    assert pool.error is None and not pool.is_alive()
    _assert_actors_dead(pool)


def test_a_game_of_two_groups_that_raises_on_ray_ends_the_run_with_a_checkpoint(
    tmp_path, ray_session, pools
):
    """A game that raises in a Ray actor's process cannot be made again for one group alone:
    the other group's wait is broken, and the run ends with a checkpoint and the game's error,
    as it does on actor threads."""
    pytest.importorskip("pettingzoo")
    from tests import games
    from tfagents_vtrace.envs.multi_agent import GameHubBroken
    from tfagents_vtrace.envs.user_envs import resolve_env

    run = _run(10**6, 1, env_id=resolve_env(games.make_breaking))
    trainer = make_driver(run, AGENT, AGENT.Config(), NET, str(tmp_path))
    with pytest.raises(GameHubBroken, match="ZeroDivisionError: the game broke") as broken:
        trainer.run()
    # the game's own error, not Ray's wrapper (whose first line names the remote call)
    assert not isinstance(broken.value, ray.exceptions.RayTaskError)
    assert str(broken.value).startswith("the game of many agents failed (ZeroDivisionError")
    assert "GameHost.unroll" in broken.value.__notes__[0]  # Ray's text: the remote traceback
    assert _saved_steps(tmp_path) == trainer.counters.env_steps
    (pool,) = pools
    assert not pool.is_alive()
    _assert_actors_dead(pool)
