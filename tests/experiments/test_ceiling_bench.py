"""benchmarks/ceiling.py: the env-only ceiling (the project's vector env stepped alone), the
fraction of it a benchmark prints, and the flagfile's environments read as text."""

from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]


def _ceiling():
    return load_benchmark("ceiling", "ceiling_bench")


ceiling = _ceiling()


def test_measure_steps_the_vector_env_alone_and_counts_every_sub_env_step():
    result = ceiling.measure("CartPole-v1", 2, 201)
    assert result["env_id"] == "CartPole-v1" and result["num_envs"] == 2
    assert result["steps"] == 202  # whole vector steps, at least the 201 asked for
    assert result["seconds"] > 0 and result["sps"] == pytest.approx(202 / result["seconds"])
    timed = ceiling.measure("CartPole-v1", 2, 2, seconds=0.05)
    assert timed["seconds"] >= 0.05 and timed["steps"] > 2  # stepped until the time was up
    with pytest.raises(ValueError, match="num_envs and steps"):
        ceiling.measure("CartPole-v1", 0, 10)


def test_fraction_and_its_format():
    assert ceiling.fraction(1_500.0, 4_000.0) == 0.375
    assert ceiling.fraction(None, 4_000.0) is None
    assert ceiling.fraction(1_500.0, None) is None and ceiling.fraction(1_500.0, 0.0) is None
    cells = [ceiling.format_fraction(x) for x in (0.375, 1.2, 0.042, 0.0053, 0.0, None)]
    assert cells == ["38%", "120%", "4.2%", "0.53%", "0.00%", "-"]


def test_run_envs_reads_the_flagfile_and_the_extra_flags_as_text(tmp_path):
    base = tmp_path / "base.cfg"
    base.write_text("--env=ALE/Pong-v5\n--num_envs=4\n")
    cfg = tmp_path / "run.cfg"
    cfg.write_text("# a comment\n--flagfile=base.cfg\n--num_actors=2\n--env_mode=sync\n"
                   "--screen_size=42\n--nojit_compile\n")  # fmt: skip
    spec = ceiling.run_envs(str(cfg))
    assert spec == {"env_id": "ALE/Pong-v5", "num_envs": 8, "mode": "sync",
                    "env_kwargs": {"screen_size": 42}}  # fmt: skip
    spec = ceiling.run_envs(str(cfg), ["--num_envs=3", "--num_actors=0", "--env_mode=auto"])
    assert (spec["num_envs"], spec["mode"]) == (3, "auto")  # 0 actors: one inline actor
    assert ceiling.run_envs(None) == {"env_id": "CartPole-v1", "num_envs": 16, "mode": "auto",
                                      "env_kwargs": {}}  # fmt: skip
    shipped = ROOT / "experiments" / "configs" / "impala_minatar_breakout.cfg"
    assert ceiling.run_envs(str(shipped))["num_envs"] == 64
    with pytest.raises(ValueError, match="screen_size"):  # a setting CartPole does not take
        ceiling.run_envs(None, ["--screen_size=42"])
    assert ceiling.label(spec) == 'ALE/Pong-v5 x3 {"screen_size": 42}'
    assert ceiling.label({"env_id": "CartPole-v1", "num_envs": 2, "mode": "async"}) == (
        "CartPole-v1 x2 async"
    )


def test_ceilings_keep_each_set_of_environments_rounds_and_errors():
    good = {"env_id": "CartPole-v1", "num_envs": 2, "mode": "auto", "env_kwargs": {}}
    bad = dict(good, env_id="NoSuchEnv-v9")
    ceilings = ceiling.Ceilings(100, in_process=True, seconds=0.0)
    assert ceilings.measure(good)["sps"] > 0 and ceilings.measure(good)["sps"] > 0
    assert ceilings.measure(bad) is None and "NoSuchEnv" in ceilings.last_error(bad)
    summary = ceilings.summary()
    assert list(summary) == ["CartPole-v1 x2", "NoSuchEnv-v9 x2"]
    assert len(summary["CartPole-v1 x2"]["runs"]) == 2 and summary["CartPole-v1 x2"]["median"]
    assert summary["NoSuchEnv-v9 x2"]["median"] is None
    assert len(summary["NoSuchEnv-v9 x2"]["errors"]) == 1
    off = ceiling.Ceilings(0)
    assert off.measure(good) is None and off.median(good) is None and off.summary() == {}


@pytest.mark.slow  # a fresh process importing gymnasium and the MinAtar package
def test_the_script_measures_a_minatar_game_in_a_fresh_process():
    """Run as a script, benchmarks/ must leave sys.path first: benchmarks/minatar.py would
    shadow the ``minatar`` package that MinAtar ids import."""
    pytest.importorskip("minatar")
    result = ceiling.measure_subprocess("MinAtar/Breakout-v1", 4, 400)
    assert result["num_envs"] == 4 and result["steps"] == 400 and result["sps"] > 0
    with pytest.raises(RuntimeError, match="env-only ceiling of NoSuchEnv-v9 x 2 failed"):
        ceiling.measure_subprocess("NoSuchEnv-v9", 2, 10)
