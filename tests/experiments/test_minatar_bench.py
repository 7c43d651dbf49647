"""benchmarks/minatar.py: the median table (and the IQM over seeds with its bootstrap CI) from
hand-made runs, the seed curves, its argument checks, and a tiny end-to-end run of each
system (table, JSON line, PNGs)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "minatar.py"


def _bench():
    return load_benchmark("minatar", "minatar_bench")


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
    assert lines[0].endswith("| greedy IQM [95% CI] | sampled IQM [95% CI] |")
    # IQM of 3 runs: their mean (scipy trim_mean(x, 0.25) drops floor(3 / 4) = 0 runs); its
    # 95% bootstrap CI over 3 runs spans them all (3 draws of the lowest: 1/27 > 2.5%).
    # no env-only ceiling given: its column says so
    assert lines[2] == ("| breakout | ours | 3/3 | 14.00 | 8.00 | 110.0 | 9 | - | 2.73x "
                        "| 18.00 [10.00, 30.00] | 8.00 [7.00, 9.00] |")  # fmt: skip
    assert lines[3] == ("| breakout | sb3_ppo | 1/1 | 4.00 | 5.00 | 300.0 | 3 | - | 1.00x "
                        "| 4.00 [4.00, 4.00] | 5.00 [5.00, 5.00] |")  # fmt: skip
    assert lines[4] == ("| freeway | ours | 1/2 | 20.00 | 21.00 | 50.0 | 20 | - | - "
                        "| 20.00 [20.00, 20.00] | 21.00 [21.00, 21.00] |")  # fmt: skip
    assert (ours["greedy_iqm"], ours["greedy_iqm_ci"]) == (18.0, [10.0, 30.0])
    assert (ours["sampled_iqm"], ours["sampled_iqm_ci"]) == (8.0, [7.0, 9.0])
    assert bench.few_runs_note(table).startswith("Note: 1 run: a 95% bootstrap CI over so few")
    stats = bench.stats_by_system(records)
    assert list(stats) == ["ours", "sb3_ppo"] and list(stats["ours"]) == ["greedy", "sampled"]
    greedy = stats["ours"]["greedy"]
    assert list(greedy["tasks"]) == ["breakout", "freeway"] and "aggregate" not in greedy
    assert greedy["tasks"]["breakout"] == {
        "runs": 3, "median": 14.0, "median_ci": [10.0, 30.0], "iqm": 18.0,
        "iqm_ci": [10.0, 30.0],
    }  # fmt: skip
    assert (greedy["confidence"], greedy["reps"]) == (0.95, 2000)


def test_the_median_table_states_each_system_as_a_fraction_of_its_env_only_ceiling():
    bench = _bench()
    records = [
        _rec("breakout", "ours", 0, 1.0, 1.0, 10.0) | {"ceiling": "B x16"},  # 100 steps/s
        _rec("breakout", "ours", 1, 1.0, 1.0, 5.0) | {"ceiling": "B x16"},  # 200 steps/s
        _rec("breakout", "sb3_ppo", 0, 1.0, 1.0, 2.0) | {"ceiling": "B x8"},  # 500 steps/s
    ]
    table = bench.median_table(records, {"B x16": 10_000.0, "B x8": 4_000.0})
    ours, sb3 = table["breakout"]["ours"], table["breakout"]["sb3_ppo"]
    assert ours["ceiling_sps"] == 10_000.0 and ours["of_ceiling"] == pytest.approx(0.015)
    assert sb3["ceiling_sps"] == 4_000.0 and sb3["of_ceiling"] == pytest.approx(0.125)
    env_only = {"breakout": [{"name": "env_only x16", "ok": 2, "runs": 2, "sps": 10_000.0}]}
    lines = bench.format_table(table, env_only).splitlines()
    assert "| steps/s | of env-only ceiling | SB3 wall / this wall |" in lines[0]
    assert lines[2] == "| breakout | env_only x16 | 2/2 | - | - | - | 10000 | - | - | - | - |"
    assert lines[3].startswith("| breakout | ours | 2/2 | 1.00 | 1.00 | 7.5 | 150 | 1.5% | ")
    assert lines[4].startswith("| breakout | sb3_ppo | 1/1 | 1.00 | 1.00 | 2.0 | 500 | 12% | ")


def test_a_runs_score_comes_with_its_standard_error():
    bench = _bench()
    returns = [0.0, 3.0, 12.0, 41.0, 7.0]
    mean, se = bench.mean_and_se(returns)
    assert mean == pytest.approx(np.mean(returns))
    assert se == pytest.approx(np.std(returns) / np.sqrt(len(returns)))  # SB3's population std
    assert bench.mean_and_se([5.0]) == (5.0, 0.0)


def test_runs_of_ours_and_the_peer_take_turns_seed_by_seed(monkeypatch, tmp_path, capsys):
    bench = _bench()
    order = []

    def ceiling(env_id, num_envs, steps, **kwargs):
        order.append(("ceiling", env_id, num_envs))
        return {"env_id": env_id, "num_envs": num_envs, "steps": steps, "seconds": 0.5,
                "sps": 1000.0 * num_envs}  # fmt: skip

    def runner(system):
        def run(game, seed, logdir, args):
            order.append((game, system, seed))
            return _rec(game, system, seed, 1.0, 1.0, 1.0) | {"rc": 0, "logdir": logdir}

        return run

    monkeypatch.setattr(bench, "run_ours", runner("ours"))
    monkeypatch.setattr(bench, "run_sb3", runner("sb3_ppo"))
    monkeypatch.setattr(bench.ceiling, "measure_subprocess", ceiling)
    args = bench.parse_args(["--total_steps=10", "--extra_flags=--num_envs=2 --num_actors=2"])
    bench.run_all(args, str(tmp_path), ["breakout"], ["ours", "sb3_ppo"], [0, 1, 2], [0, 1])
    # each seed's env-only ceilings first: ours 2 envs x 2 actors, SB3 its 8 (seeds 0, 1)
    x4, x8 = ("ceiling", "MinAtar/Breakout-v1", 4), ("ceiling", "MinAtar/Breakout-v1", 8)
    assert order == [x4, x8, ("breakout", "ours", 0), ("breakout", "sb3_ppo", 0),
                     x4, x8, ("breakout", "ours", 1), ("breakout", "sb3_ppo", 1),
                     x4, ("breakout", "ours", 2)]  # fmt: skip
    out = capsys.readouterr().out
    assert out.startswith("machine: ")
    assert "| breakout | env_only x4 | 2 | - | - | 0.5 | 4000 | - |" in out
    assert "| breakout | ours | 2 | 1.00 | 1.00 | 1.0 | 1000 | 25% |" in out
    assert "| breakout | sb3_ppo | 1 | 1.00 | 1.00 | 1.0 | 1000 | 12% |" in out
    assert "| breakout | env_only x8 | 2/2 | - | - | - | 8000 | - | - | - | - |" in out
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["env_only_ceiling"]["MinAtar/Breakout-v1 x4"]["runs"] == [4000.0] * 3
    assert [r["of_ceiling"] for r in summary["runs"]] == [0.25, 0.125, 0.25, 0.125, 0.25]
    assert summary["medians"]["breakout"]["sb3_ppo"]["of_ceiling"] == 0.125


def test_seed_curves_draw_each_systems_median_and_band_per_game(tmp_path, capsys):
    bench = _bench()
    records = []
    for system, seed, scale in [("ours", 0, 1.0), ("sb3_ppo", 0, 0.5), ("ours", 1, 2.0)]:
        logdir = tmp_path / f"breakout_{system}_seed{seed}"
        logdir.mkdir()
        rows = [{"step": s, "wall_time": s / 100, "episode_return": scale * s / 1000,
                 "eval_return": scale * s / 500} for s in (1000, 2000, 3000)]  # fmt: skip
        (logdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        records.append(_rec("breakout", system, seed, 1.0, 1.0, 1.0) | {"logdir": str(logdir)})
    records.append(_rec("freeway", "ours", 0, None, None, None) | {"logdir": str(tmp_path / "x")})
    path = str(tmp_path / "curves.png")
    written = bench.seed_curves(records, ["breakout", "freeway"], path)
    assert written == [str(tmp_path / "curves_breakout_seeds.png")]
    assert Path(written[0]).stat().st_size > 0
    csv = (tmp_path / "curves_breakout_seeds.csv").read_text().splitlines()
    assert csv[0].startswith("group,metric,x_axis,x,median,iqr_low,iqr_high,runs,group_runs")
    ours = [line.split(",") for line in csv[1:] if line.startswith("ours,eval_return,step,")]
    assert [float(c[4]) for c in ours] == [3.0, 6.0, 9.0]  # median of the two seeds
    assert {c[-1] for c in ours} == {"2"}
    assert "no seed curves for freeway: no run wrote metrics.jsonl" in capsys.readouterr().out


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


@pytest.mark.long  # subprocesses importing TensorFlow and training (the suite's time budget)
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
    assert run["greedy_se"] >= 0 and run["sampled_se"] >= 0  # over the 2 final episodes
    assert summary["medians"]["breakout"]["ours"]["greedy_return"] == run["greedy_return"]
    cell = summary["medians"]["breakout"]["ours"]
    assert cell["greedy_iqm"] == run["greedy_return"]
    assert cell["greedy_iqm_ci"] == [run["greedy_return"]] * 2  # one seed: the point
    assert cell["sampled_iqm_ci"] == [run["sampled_return"]] * 2
    greedy = summary["seed_stats"]["ours"]["greedy"]["tasks"]["breakout"]
    assert greedy["runs"] == 1 and greedy["iqm"] == run["greedy_return"]
    assert summary["stats_note"].startswith("Note: 1 run: a 95% bootstrap CI")
    assert any(line.endswith("| greedy IQM [95% CI] | sampled IQM [95% CI] |") for line in lines)
    assert summary["seed_curves"] == [str(tmp_path / "curves_breakout_seeds.png")]
    assert (tmp_path / "curves_breakout_seeds.png").stat().st_size > 0
    rows = [json.loads(x) for x in open(Path(run["logdir"]) / "metrics.jsonl")]
    assert [r["step"] for r in rows if "eval_return" in r][-1] >= 4000


@pytest.mark.slow  # a subprocess training SB3 PPO
def test_tiny_sb3_run_gives_a_json_row(tmp_path):
    pytest.importorskip("minatar")
    pytest.importorskip("stable_baselines3")
    # no ceiling here: the tiny run of ours and the unit tests above cover it
    _, summary = _run(
        tmp_path, "--systems=sb3_ppo", "--total_steps=2048", "--eval_every=1024",
        "--eval_episodes=2", "--final_episodes=2", "--ceiling_steps=0", timeout=120,
    )  # fmt: skip
    [run] = summary["runs"]
    assert run["system"] == "sb3_ppo" and run["rc"] == 0 and run["steps"] >= 2048, run
    assert isinstance(run["greedy_return"], float) and isinstance(run["sampled_return"], float)
    assert run["greedy_se"] >= 0 and run["sampled_se"] >= 0
    assert summary["sb3_seeds"] == [0]
