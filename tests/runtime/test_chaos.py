"""Runs under fire (docs/design.md, "The run directory": resume).

``python -m experiments.train`` is SIGKILLed at random moments (start-up, setup, training,
checkpoint and replay-archive writes, the final evaluation, the export) and run again until
it exits 0, for IMPALA, ACER (replay archived beside each checkpoint) and TAAC; the run must
then have ended whole: ``final.json``, one strict-JSON row per step in ``metrics.jsonl`` with
counters that never go backwards, no temporary file, a policy that loads and acts, and no
traceback from any start. The kill loop and the checks live in ``benchmarks/chaos_lib.py``,
which ``benchmarks/chaos_resume.py`` runs with 50+ kills per agent (IMPALA on the full
``impala_cartpole.cfg`` budget, where it must also solve CartPole).

Then damaged run directories: one short IMPALA run (and one ACER run, for its replay
archives) per test session, copied per case, is damaged and resumed by the same command with a
larger ``--total_steps``; it must resume from the newest intact checkpoint (the rows up to it
unchanged), move the damaged files into ``checkpoints/damaged/`` and keep ``metrics.jsonl``
whole.
"""

import fcntl
import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.bench_modules import load_benchmark

# One xdist worker runs the module (make test: --dist loadgroup), so its module-scoped
# fixture is built once, not once per worker.
pytestmark = pytest.mark.xdist_group("chaos")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
chaos = load_benchmark("chaos_lib", register=True)  # dataclasses look their module up by name

KILLS = 2  # per agent (benchmarks/chaos_resume.py: 50+)

# One short run per agent for the damage cases: checkpoints every 0.05 s, so the directory
# ends with three (max_to_keep) to fall back through.
_SMALL = (
    "--eval_episodes=2",
    "--checkpoint_every_s=0.05",
    "--log_every_s=0.1",
    "--nojit_compile",
    "--noexport",
)
IMPALA = chaos.Case(
    "impala", "experiments/configs/impala_cartpole.cfg",
    ("--total_steps=2400", "--eval_every=800", *_SMALL),
)  # fmt: skip
ACER = chaos.Case(
    "acer", "experiments/configs/acer_cartpole.cfg",
    ("--total_steps=1920", "--eval_every=640", *_SMALL),
)  # fmt: skip
MORE = {"impala": 3200, "acer": 2560}  # --total_steps of the resuming command


def _train(case, logdir, *extra, expect=0):
    out = subprocess.run(
        case.command(str(logdir), *extra), cwd=ROOT, env=chaos.child_env(),
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert chaos.TRACEBACK not in out.stderr, out.stderr[-4000:]
    assert out.returncode == expect, (out.returncode, out.stderr[-3000:])
    return out


def _rows(logdir):
    rows, problems = chaos.read_rows(str(logdir))
    assert not problems, problems
    return rows


def _steps(logdir):
    return chaos.complete_steps(str(logdir))  # newest first


# ------------------------------------------------------------------------ killed at random
@pytest.mark.slow  # ~10 starts of a subprocess importing TensorFlow, per agent
@pytest.mark.parametrize("agent", sorted(chaos.SHORT))
def test_killed_at_random_moments_the_same_command_ends_the_run_whole(agent, tmp_path):
    case = chaos.SHORT[agent]  # the learning check is the long version's (LONG["impala"])
    campaign = chaos.run_campaign(
        case, str(tmp_path / "run"), KILLS, seed=0, out_dir=str(tmp_path / "logs"),
        max_seconds=480,
    )  # fmt: skip
    failures = chaos.check_campaign(campaign)
    if campaign.last.returncode == 0:
        problem = chaos.policy_acts(str(tmp_path / "run" / "policy"), case.env_id)
        failures += [problem] if problem else []
    history = "\n".join(
        f"  start {a.index}: plan={a.plan} rc={a.returncode} kill_at={a.kill_at} phase={a.phase}"
        for a in campaign.attempts
    )
    assert not failures, "\n".join(failures) + "\n" + history


# ------------------------------------------------------------------------ damaged directories
def _shared_run(tmp_path_factory, case):
    """``case``'s run directory, trained once per test session: pytest-xdist workers share
    the session's base directory and take turns through a lock file."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the session's directory, above each worker's
    logdir = root / f"chaos-{case.agent}" / "run"
    logdir.parent.mkdir(exist_ok=True)
    with open(logdir.parent / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (logdir / "final.json").exists():
            shutil.rmtree(logdir, ignore_errors=True)
            _train(case, logdir)
    assert len(_steps(logdir)) >= 2
    return logdir


@pytest.fixture(scope="module")
def impala_run(tmp_path_factory):
    return _shared_run(tmp_path_factory, IMPALA)


@pytest.fixture(scope="module")
def acer_run(tmp_path_factory):
    return _shared_run(tmp_path_factory, ACER)


def _copy(run, tmp_path):
    return shutil.copytree(run, tmp_path / "run")


def _resumes_from(case, logdir, step, skipped=()):
    """Runs the same command with more steps; checks it resumed from checkpoint ``step``
    (the rows up to it kept as they were, the damaged checkpoints ``skipped`` named in one
    warning line and moved into ``checkpoints/damaged/``). Returns the final JSON line."""
    before = [r for r in _rows(logdir) if r["step"] <= step]
    out = _train(case, logdir, f"--total_steps={MORE[case.agent]}")
    log = out.stderr[-3000:]  # the message of every failed check below
    final = chaos.last_json_line(out.stdout)
    assert final["final"] is True and final["resumed"] is True, (final, log)
    assert final["step"] >= MORE[case.agent], (final, log)
    rows = _rows(logdir)
    assert not chaos.row_problems(rows), (chaos.row_problems(rows), log)
    kept = [r for r in rows if r["step"] <= step]
    assert kept == before, (f"not resumed from ckpt-{step}", kept[-3:], before[-3:], log)
    assert rows[-1]["step"] == final["step"], log
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning: ")]
    if skipped:
        assert any(
            line.startswith(f"warning: resuming from ckpt-{step}: skipped ") and
            all(f"ckpt-{s} (" in line for s in skipped) for line in warnings
        ), log  # fmt: skip
        damaged = set(os.listdir(logdir / "checkpoints" / "damaged"))
        for s in skipped:
            assert {f"ckpt-{s}.index", f"ckpt-{s}.data-00000-of-00001"} <= damaged, damaged
    else:
        assert not any("skipped" in line for line in warnings), log
        assert not os.path.exists(logdir / "checkpoints" / "damaged"), log
    assert not chaos.leftovers(str(logdir)), (chaos.leftovers(str(logdir)), log)
    return final


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
@pytest.mark.parametrize("text", ['model_checkpoint_path: "ckpt-6', ""], ids=["garbled", "empty"])
def test_a_garbled_or_empty_state_file_resumes_from_the_newest_checkpoint(
    impala_run, tmp_path, text
):
    logdir = _copy(impala_run, tmp_path)
    (logdir / "checkpoints" / "checkpoint").write_text(text)
    # What saves and exports killed before their renames leave (removed on resume).
    temp = logdir / "checkpoints" / "ckpt-99999_temp"
    temp.mkdir()
    (temp / "part-00000-of-00001.data-00000-of-00001.tempstate123").write_bytes(b"x")
    (logdir / "policy.tmp-123-abc").mkdir()
    newest = _steps(logdir)[0]
    _resumes_from(IMPALA, logdir, newest)
    state = (logdir / "checkpoints" / "checkpoint").read_text()
    assert f'model_checkpoint_path: "ckpt-{_steps(logdir)[0]}"' in state


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
@pytest.mark.parametrize("damage", ["truncated_data", "garbage_index"])
def test_a_damaged_newest_checkpoint_is_moved_aside_and_the_next_one_resumes(
    impala_run, tmp_path, damage
):
    logdir = _copy(impala_run, tmp_path)
    newest, previous = _steps(logdir)[:2]
    prefix = logdir / "checkpoints" / f"ckpt-{newest}"
    if damage == "truncated_data":
        data = prefix.with_name(prefix.name + ".data-00000-of-00001")
        data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    else:
        index = prefix.with_name(prefix.name + ".index")
        index.write_bytes(os.urandom(index.stat().st_size))
    _resumes_from(IMPALA, logdir, previous, skipped=[newest])


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_replay_archive_failing_its_checksum_falls_back_with_its_checkpoint(acer_run, tmp_path):
    logdir = _copy(acer_run, tmp_path)
    newest, previous = _steps(logdir)[:2]
    archive = logdir / "checkpoints" / f"replay-{newest}.npz"
    data = bytearray(archive.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(b ^ 0xFF for b in data[middle : middle + 16])
    archive.write_bytes(bytes(data))
    (logdir / "checkpoints" / "replay-99999.tmp.npz").write_bytes(b"x")  # a killed archive write
    final = _resumes_from(ACER, logdir, previous, skipped=[newest])
    assert f"replay-{newest}.npz" in os.listdir(logdir / "checkpoints" / "damaged")
    assert final["replay_restored"] > 0  # the previous checkpoint's archive was loaded


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_torn_last_metrics_line_is_dropped_before_appending(impala_run, tmp_path):
    logdir = _copy(impala_run, tmp_path)
    path = logdir / "metrics.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    kept = [json.loads(line) for line in lines[:-1]]
    out = _train(IMPALA, logdir, f"--total_steps={MORE['impala']}")
    assert chaos.last_json_line(out.stdout)["resumed"] is True
    rows = _rows(logdir)  # every line parses
    assert rows[: len(kept)] == kept
    assert not chaos.row_problems(rows), chaos.row_problems(rows)
    assert rows[-1]["step"] >= MORE["impala"]


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_start_killed_before_its_step0_checkpoint_restarts(impala_run, tmp_path):
    logdir = tmp_path / "run"
    logdir.mkdir()
    shutil.copy(impala_run / "config.json", logdir / "config.json")
    (logdir / "metrics.jsonl").write_text("")
    out = _train(IMPALA, logdir)  # the same command, without --overwrite
    final = chaos.last_json_line(out.stdout)
    assert final["resumed"] is False and final["step"] == IMPALA.total_steps
    rows = _rows(logdir)
    assert rows[0]["step"] < rows[-1]["step"] == IMPALA.total_steps
    assert not chaos.row_problems(rows)


@pytest.mark.slow
def test_a_logdir_with_glob_characters_trains_resumes_evaluates_and_exports(tmp_path):
    logdir = tmp_path / "a [b]*?c é"
    short = chaos.Case(
        IMPALA.agent, IMPALA.flagfile, (*IMPALA.flags, "--total_steps=800", "--export")
    )
    _train(short, logdir)
    first = _rows(logdir)
    out = _train(short, logdir, "--total_steps=1600")
    final = chaos.last_json_line(out.stdout)
    assert final["resumed"] is True and final["step"] == 1600
    rows = _rows(logdir)
    assert rows[: len(first)] == first and not chaos.row_problems(rows)
    env = chaos.child_env()
    evaluate = subprocess.run(
        [sys.executable, "-m", "experiments.evaluate", f"--policy={logdir / 'policy'}",
         "--env=CartPole-v1", "--episodes=2"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert evaluate.returncode == 0 and chaos.TRACEBACK not in evaluate.stderr, evaluate.stderr
    summary = json.loads(evaluate.stdout.strip().splitlines()[-1])
    assert summary["env"] == "CartPole-v1" and summary["episodes"] == 2 and summary["mean"] > 0
    output = tmp_path / "exported [x]*? é"
    export = subprocess.run(
        [sys.executable, "-m", "experiments.export", f"--logdir={logdir}", f"--output={output}"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert export.returncode == 0 and chaos.TRACEBACK not in export.stderr, export.stderr
    assert chaos.policy_acts(str(output), "CartPole-v1") is None


# ------------------------------------------------------ resume cases the chaos runs turned up
@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_start_killed_inside_its_step0_checkpoint_restarts(impala_run, tmp_path):
    logdir = tmp_path / "run"
    (logdir / "checkpoints").mkdir(parents=True)
    shutil.copy(impala_run / "config.json", logdir / "config.json")
    (logdir / "metrics.jsonl").write_text("")
    newest = _steps(impala_run)[0]
    shutil.copy(
        impala_run / "checkpoints" / f"ckpt-{newest}.data-00000-of-00001",
        logdir / "checkpoints" / "ckpt-0.data-00000-of-00001",
    )
    (logdir / "checkpoints" / "ckpt-0.index").write_bytes(b"")  # opened, not yet written
    out = _train(IMPALA, logdir)
    assert chaos.last_json_line(out.stdout)["step"] == IMPALA.total_steps


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_killed_state_file_write_leaves_nothing_behind(impala_run, tmp_path):
    logdir = _copy(impala_run, tmp_path)
    name = "checkpoint.tmpb8c2251b8b9e49fe8f339fb0245b7c3c"  # file_io.atomic_write_string_to_file
    (logdir / "checkpoints" / name).write_text('model_checkpoint_path: "ckpt-')
    _train(IMPALA, logdir, f"--total_steps={MORE['impala']}")
    assert chaos.leftovers(str(logdir)) == []


@pytest.mark.long  # the command-line twin of a test_checkpoint_fallback.py case
def test_a_resumed_run_keeps_max_to_keep_checkpoints_each_with_its_replay_archive(
    acer_run, tmp_path
):
    logdir = _copy(acer_run, tmp_path)
    assert chaos.retention_problems(str(logdir)) == []
    _train(ACER, logdir, f"--total_steps={MORE['acer']}")
    assert chaos.retention_problems(str(logdir)) == []
