"""Runs stopped the way an operator's world stops them (issue #52): SIGTERM from a scheduler,
Ctrl-C and a closed terminal's SIGHUP to the process or its whole process group, an output
pipe whose reader went away, on runs whose simulator fails on 1% of its steps, whose A3C
workers' environments hang, and whose Ray actor processes are killed. After each stop the
same command resumes from the stop's checkpoint, and it finally ends the run whole.

The campaigns and every check live in ``benchmarks/chaos_signals.py`` (its ``--short``
cases; the benchmark runs 10-20 signals per case, figures in ``docs/results/chaos.md``):
a stopped start exits 130 within ``--stop_grace_s`` plus a margin, says ``interrupted at
step N; checkpoint ...``, its newest complete checkpoint is N and no metrics row is past it,
N grows from stop to stop, the next start says ``Resuming DIR from step N``, no process of
the start outlives it (Ray's included), and the run ends with ``final.json``, strictly
increasing rows and no temporary file. One campaign per case, shared by the tests that
look at it (module-scoped fixtures), all on one xdist worker.
"""

import importlib.util
import json
import os
import threading

import pytest

from tests.bench_modules import load_benchmark

# make test's --dist loadgroup: one worker runs the module, so each campaign runs once.
pytestmark = pytest.mark.xdist_group("chaos_signals")

signals = load_benchmark("chaos_signals", register=True)  # dataclasses look their module up
Plan = signals.Plan

HAS_RAY = importlib.util.find_spec("ray") is not None  # the campaign's trainer imports it

FLAKY_PLANS = [
    Plan("SIGTERM"),  # a scheduler's stop, to the trainer
    Plan("SIGHUP", group=True, pipe=True),  # a closed SSH session under `2>&1 | head -3`
]  # then the final start, which resumes from the closed-pipe start's stop
PIPE_START = 1


def _campaign(tmp_path_factory, name, plans):
    case = signals.short_cases(len(plans))[name]
    root = tmp_path_factory.mktemp(name)
    campaign = signals.run_signal_campaign(
        case, str(root / "run"), len(plans), seed=0, out_dir=str(root / "logs"), plans=plans
    )
    return campaign, signals.check_signal_campaign(campaign)


def _history(campaign) -> str:
    return "\n".join(
        f"  start {a.index}: {a.plan.describe() if a.plan else 'to the end'} rc={a.returncode} "
        f"sent={a.sent_at} exit_s={a.exit_s} saved={a.stopped_step} resumed={a.resumed_from} "
        f"hangs={a.hangs} ray_kills={len(a.ray_kills)} ray_deaths={a.ray_deaths}"
        for a in campaign.attempts
    )


def _final(campaign) -> dict:
    with open(os.path.join(campaign.logdir, "final.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def flaky(tmp_path_factory):
    return _campaign(tmp_path_factory, "flaky-impala", FLAKY_PLANS)


@pytest.fixture(scope="module")
def hanging(tmp_path_factory):
    return _campaign(tmp_path_factory, "hang-a3c", [Plan("SIGINT", group=True)])


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory):
    return _campaign(tmp_path_factory, "ray-impala", [Plan("SIGTERM")])


@pytest.mark.slow  # three starts of a training subprocess
def test_a_stop_of_a_run_on_a_flaky_simulator_checkpoints_and_the_same_command_ends_it(flaky):
    campaign, failures = flaky
    others = {k: v for k, v in signals.failures_by_start(failures).items() if k != PIPE_START}
    assert not others, "\n".join(sum(others.values(), [])) + "\n" + _history(campaign)
    first, pipe, last = campaign.attempts
    assert first.returncode == 130 and first.stopped_step > 0, _history(campaign)
    assert pipe.plan.pipe and pipe.pipe_closed_at is not None  # the reader went away
    assert first.exit_s < campaign.case.grace_s + campaign.case.margin_s
    assert last.plan is None and last.returncode == 0
    # the newest checkpoint: the closed-pipe start's stop (the first one's if it failed)
    assert last.resumed_from == pipe.newest_checkpoint >= first.stopped_step
    final = _final(campaign)
    assert final["step"] >= campaign.case.case.total_steps
    assert final["env_restarts"] > 0  # the 1% failures happened and were restarted


@pytest.mark.slow
def test_a_closed_output_pipe_never_ends_a_resumed_run_and_its_stop_checkpoints(flaky):
    campaign, failures = flaky
    start = campaign.attempts[PIPE_START]
    mine = signals.failures_by_start(failures).get(PIPE_START, [])
    assert start.signalled and start.returncode == 130, "\n".join(mine)
    assert not mine, "\n".join(mine)


@pytest.mark.slow  # two starts of an A3C run whose workers' environments hang
def test_a_stop_while_a3c_workers_hang_checkpoints_and_the_same_command_ends_the_run(hanging):
    campaign, failures = hanging
    assert not failures, "\n".join(failures) + "\n" + _history(campaign)
    first, last = campaign.attempts
    assert first.returncode == 130 and first.exit_s < campaign.case.grace_s + 2.0
    assert last.returncode == 0 and last.resumed_from == first.stopped_step > 0
    # hung instances were abandoned and their workers replaced (each start logs its own)
    assert sum(a.hangs for a in campaign.attempts) >= 1, _history(campaign)
    assert _final(campaign)["step"] >= campaign.case.case.total_steps


@pytest.mark.skipif(not HAS_RAY, reason="ray is not installed (pip install .[ray])")
@pytest.mark.slow  # two starts of a private Ray with two actors, actors killed
def test_sigterm_to_a_ray_run_whose_actors_are_killed_checkpoints_and_it_resumes(ray_run):
    campaign, failures = ray_run
    assert not failures, "\n".join(failures) + "\n" + _history(campaign)
    first, last = campaign.attempts
    assert first.returncode == 130 and first.exit_s < campaign.case.grace_s + 2.0
    # an actor process was killed and the run reported (and replaced) it before the signal
    assert len(first.ray_kills) >= 1 and first.ray_deaths >= 1, _history(campaign)
    assert not first.left and not last.left  # Ray's services and actors ended with the run
    assert last.returncode == 0 and last.resumed_from == first.stopped_step > 0


def test_plans_cover_each_signal_both_targets_and_closed_pipes():
    rng = signals.random.Random(0)
    drawn = [signals.draw_plan(rng, 0.25) for _ in range(200)]
    assert {p.signal for p in drawn} == {"SIGTERM", "SIGINT", "SIGHUP"}
    assert not any(p.group for p in drawn if p.signal == "SIGTERM")  # a scheduler's
    assert any(p.group for p in drawn) and any(p.pipe for p in drawn)
    assert 0.1 < sum(p.pipe for p in drawn) / len(drawn) < 0.4


def test_a_hanging_instance_hangs_alone_and_never_on_the_main_thread():
    from tests.stop_envs import HangSometimes

    env = HangSometimes(hang_rate=1.0)
    env.reset(seed=0)
    env.step(0)  # the main thread (the driver's evaluation) never hangs
    stuck = threading.Thread(target=env.step, args=(0,), daemon=True)
    stuck.start()
    stuck.join(0.3)
    assert stuck.is_alive()  # an acting thread's step never returns
    fresh = HangSometimes(hang_rate=0.0)  # the replacement's new instance steps
    fresh.reset(seed=0)
    done = []
    worker = threading.Thread(target=lambda: done.append(fresh.step(0)), daemon=True)
    worker.start()
    worker.join(5)
    assert done and len(done[0]) == 5
