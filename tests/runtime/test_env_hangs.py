"""Hung environments: the watchdog notices a call past ``env_step_timeout_s``, an actor thread
or a worker stuck in one is abandoned and replaced (a worker's claimed steps go back to the
budget), acting in the learner's thread stops the run, and sources waiting for unrolls return
to the driver when a stop is requested."""

import logging
import queue
import re
import threading
import time

import gymnasium as gym
import pytest

from tfagents_vtrace.envs import failures as env_failures
from tfagents_vtrace.networks import NetworkConfig
from tfagents_vtrace.runtime.acting import actor as actor_module
from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, ActorThread, WeightStore
from tfagents_vtrace.runtime.acting.unroll_sources import InlineSource, QueueSource
from tfagents_vtrace.runtime.acting.workers import WorkerPool
from tfagents_vtrace.runtime.rundir import stop_signals

B, T = 2, 4


@pytest.fixture(autouse=True)
def fast_watchdog(monkeypatch):
    monkeypatch.setattr(env_failures.watchdog(), "poll_s", 0.05)


class HangOnce(gym.vector.VectorWrapper):
    """A CartPole vector whose ``hang_at``-th step (counted over every instance) blocks until
    ``release`` is set."""

    calls = 0
    release = threading.Event()

    def __init__(self, env, hang_at):
        super().__init__(env)
        self.hang_at = hang_at

    def step(self, actions):
        HangOnce.calls += 1
        if HangOnce.calls == self.hang_at:
            HangOnce.release.wait(30)
        return self.env.step(actions)


def cartpole(seed, hang_at=None):
    env = gym.make_vec("CartPole-v1", num_envs=B, vectorization_mode="vector_entry_point")
    env.reset(seed=seed)
    return env if hang_at is None else HangOnce(env, hang_at)


def make_actor(hang_at=None, timeout=0.3, actor_id=0):
    spec = ActorSpec("CartPole-v1", NetworkConfig(hidden_sizes=(8,)), B, T, seed=1,
                     env_step_timeout_s=timeout)  # fmt: skip
    return Actor(spec, actor_id, env_factory=lambda seed: cartpole(seed, hang_at))


@pytest.fixture
def hang():
    HangOnce.calls = 0
    HangOnce.release = threading.Event()
    yield
    HangOnce.release.set()  # let an abandoned thread end


def test_a_hung_actor_thread_is_abandoned_and_replaced(hang, caplog):
    stop, store, unrolls = threading.Event(), WeightStore(), queue.Queue(maxsize=2)

    def replace(old):  # the hang is at one call of all: the new environments do not hang
        return ActorThread(old.actor.successor(), store, unrolls, stop)

    first = ActorThread(make_actor(hang_at=3), store, unrolls, stop)
    source = QueueSource([first], unrolls, store, stop, replace)
    source.start(-1, None)  # no weights: the actors act with their own
    start = time.monotonic()
    with caplog.at_level(logging.WARNING):
        items = [source.next() for _ in range(3)]  # the first unroll hangs at its third step
    assert time.monotonic() - start < 10
    assert first.abandoned and source.threads[0] is not first and source.threads[0].is_alive()
    assert all(info["actor_id"] == 0 for _, info in items)
    assert items[-1][1]["env_restarts"] >= 1  # the replacement counts itself
    assert "has not returned for" in caplog.text and "--env_step_timeout_s=0.3" in caplog.text
    HangOnce.release.set()  # the abandoned thread returns: it delivers nothing and ends
    first.join(5)
    assert not first.is_alive() and first.error is None
    source.close()


def test_a_source_waiting_for_unrolls_returns_to_the_driver_on_a_stop_request():
    stop = threading.Event()
    idle = threading.Thread(target=stop.wait, daemon=True)  # an actor that never delivers
    idle.error = None
    source = QueueSource([idle], queue.Queue(), WeightStore(), stop)
    source.start(-1, None)
    timer = threading.Timer(0.3, stop_signals.request_stop)
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            source.next()
    finally:
        stop_signals.clear_stop()
        source.close()
    assert time.monotonic() - start < 1.5


def test_a_hung_inline_actor_stops_the_run(hang, monkeypatch):
    stopped = []
    monkeypatch.setattr(actor_module, "stop_inline", stopped.append)
    source = InlineSource(make_actor(hang_at=2))
    source.start(-1, None)
    threading.Timer(1.0, HangOnce.release.set).start()
    source.next()  # blocks in its second step until released
    assert len(stopped) == 1
    assert re.fullmatch(r"actor 0: environment CartPole-v1: an environment call has not "
                        r"returned for 0\.[34]\d* s \(the limit is --env_step_timeout_s=0\.3\)",
                        stopped[0])  # fmt: skip
    source.close()


class FakeWorker:
    """A worker whose iteration is one actor unroll; ``hang_at`` makes its actor hang."""

    def __init__(self, hang_at=None, restarts=0):
        self.actor = make_actor(hang_at=hang_at)
        self.actor._restarts_base = restarts
        self.iterations = 0

    def iterate(self):
        self.actor.unroll()
        self.iterations += 1
        return {"iterations": self.iterations}

    def replacement(self):
        return FakeWorker(restarts=self.actor.env_restarts + 1)

    def close(self):
        self.actor.close()


def test_a_hung_worker_gives_its_claim_back_and_is_replaced(hang):
    workers = [FakeWorker(hang_at=2)]
    pool = WorkerPool(workers, steps=10, start=0, total=50)
    pool.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pool.threads[0].is_alive():
        pool.advance()
        if workers[0].iterations >= 5:  # the replacement did the budget's five iterations
            break
    assert workers[0].iterations == 5 and workers[0].actor.env_restarts == 1
    assert pool.slots[0].worker is workers[0] and pool.budget.claimed == 50
    assert pool.errors == []
    pool.close()
