"""benchmarks/minatar.py: the median table from hand-made runs, its argument checks, and a tiny
end-to-end run of each system (table, JSON line, PNG)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "minatar.py"


def _bench():
    spec = importlib.util.spec_from_file_location("minatar_bench", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rec(game, system, seed, greedy, sampled, wall, steps=1000):
    return {"game": game, "system": system, "seed": seed, "greedy_return": greedy,
            "sampled_return": sampled, "wall": wall, "steps": steps,
            "sps": steps / wall if wall else None}  # fmt: skip


def test_median_table_takes_medians_per_game_and_system_and_the_wall_ratio():
    bench = _bench()
    records = [
        _rec("breakout", "ours", 0, 10.0, 8.0, 100.0),
        _rec("breakout", "sb3_ppo", 0, 4.0, 5.0, 300.0),
        _rec("breakout", "ours", 1, 14.0, 9.0, 120.0),
        _rec("breakout", "ours", 2, 30.0, 7.0, 110.0),
        _rec("freeway", "ours", 0, None, None, None),  # a failed run
        _rec("freeway", "ours", 1, 20.0, 21.0, 50.0),
    ]
    table = bench.median_table(records)
    assert list(table) == ["breakout", "freeway"]
    ours, sb3 = table["breakout"]["ours"], table["breakout"]["sb3_ppo"]
    assert (ours["runs"], ours["ok"]) == (3, 3)
    assert (ours["greedy_return"], ours["sampled_return"], ours["wall"]) == (14.0, 8.0, 110.0)
    assert ours["sps"] == pytest.approx(1000 / 110)
    assert ours["sb3_wall_ratio"] == pytest.approx(300 / 110)
    assert sb3["sb3_wall_ratio"] == pytest.approx(1.0)
    freeway = table["freeway"]["ours"]
    assert (freeway["runs"], freeway["ok"], freeway["greedy_return"]) == (2, 1, 20.0)
    assert freeway["sb3_wall_ratio"] is None  # no SB3 run of that game
    lines = bench.format_table(table).splitlines()
    assert lines[0].startswith("| game | system | runs | greedy return | sampled return")
    assert lines[2] == "| breakout | ours | 3/3 | 14.00 | 8.00 | 110.0 | 9 | 2.73x |"
    assert lines[3] == "| breakout | sb3_ppo | 1/1 | 4.00 | 5.00 | 300.0 | 3 | 1.00x |"
    assert lines[4] == "| freeway | ours | 1/2 | 20.00 | 21.00 | 50.0 | 20 | - |"


def test_bad_arguments_and_missing_flagfiles_are_one_line_errors(monkeypatch, capsys):
    bench = _bench()
    monkeypatch.setattr(bench, "missing_modules", lambda names: [])
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: pytest.fail("ran something"))
    monkeypatch.setattr(bench, "flagfile", lambda game: f"experiments/configs/nope_{game}.cfg")
    cases = [
        (["--games=pong"], "error: --games: expected names among ['breakout', "),
        (["--systems=ours,dqn"], "error: --systems: expected names among ['ours', 'sb3_ppo']"),
        (["--seeds=a"], "error: --seeds: expected comma-separated integers, received 'a'"),
        (["--games=asterix"], "error: --games=asterix: no flagfile "
                              "experiments/configs/nope_asterix.cfg for our agent"),
    ]  # fmt: skip
    for argv, message in cases:
        with pytest.raises(SystemExit) as e:
            bench.main(argv)
        assert e.value.code == 2
        [line] = capsys.readouterr().err.strip().splitlines()
        assert line.startswith(message), line
    # SB3 alone needs no flagfile; without the bench extra it stops at once.
    monkeypatch.setattr(
        bench, "missing_modules", lambda names: [n for n in names if n != "minatar"]
    )
    with pytest.raises(SystemExit) as e:
        bench.main(["--systems=sb3_ppo", "--games=asterix"])
    assert e.value.code == 2
    assert capsys.readouterr().err.strip() == (
        "error: stable-baselines3 (and torch) not installed (no module torch, "
        "stable_baselines3): install '.[bench]' or pass --systems=ours"
    )


def _run(tmp_path, *argv, timeout):
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--games=breakout", "--seeds=0", f"--workdir={tmp_path}",
         f"--plot={tmp_path / 'curves.png'}", *argv],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    assert (tmp_path / "curves.png").stat().st_size > 0
    return lines, summary


@pytest.mark.slow  # subprocesses importing TensorFlow and training
def test_tiny_run_of_ours_prints_the_table_the_json_and_the_plot(tmp_path):
    pytest.importorskip("minatar")
    lines, summary = _run(
        tmp_path, "--systems=ours", "--total_steps=4000", "--eval_every=2000",
        "--eval_episodes=2", "--final_episodes=2", "--extra_flags=--num_envs=8", timeout=120,
    )  # fmt: skip
    assert any(line.startswith("| breakout | ours | 0 | ") for line in lines)
    assert any(line.startswith("| breakout | ours | 1/1 | ") for line in lines)
    assert summary["systems"] == ["ours"] and summary["games"] == ["breakout"]
    [run] = summary["runs"]
    assert run["rc"] == 0 and "error" not in run, run
    assert run["steps"] >= 4000 and run["wall"] > 0 and run["sps"] > 0
    assert isinstance(run["greedy_return"], float) and isinstance(run["sampled_return"], float)
    assert summary["medians"]["breakout"]["ours"]["greedy_return"] == run["greedy_return"]
    rows = [json.loads(x) for x in open(Path(run["logdir"]) / "metrics.jsonl")]
    assert [r["step"] for r in rows if "eval_return" in r][-1] >= 4000


@pytest.mark.slow  # a subprocess training SB3 PPO
def test_tiny_sb3_run_gives_a_json_row(tmp_path):
    pytest.importorskip("minatar")
    pytest.importorskip("stable_baselines3")
    _, summary = _run(
        tmp_path, "--systems=sb3_ppo", "--total_steps=2048", "--eval_every=1024",
        "--eval_episodes=2", "--final_episodes=2", timeout=60,
    )  # fmt: skip
    [run] = summary["runs"]
    assert run["system"] == "sb3_ppo" and run["rc"] == 0 and run["steps"] >= 2048, run
    assert isinstance(run["greedy_return"], float) and isinstance(run["sampled_return"], float)
    assert summary["sb3_seeds"] == [0]
