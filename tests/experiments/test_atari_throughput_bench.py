"""benchmarks/atari_throughput.py: argument checks, and one tiny run of ours end to end."""

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench_modules import load_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "atari_throughput.py"


def _run(*args, timeout=600):
    return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_an_unknown_system_is_one_line_and_exit_code_2():
    out = _run("--systems=ours,dqn")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines()[-1].startswith("error: --systems: unknown ['dqn']")


@pytest.mark.long  # trains 400 Pong steps through experiments.train (the suite's time)
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("ale_py", "cv2")), reason="atari extra"
)
def test_a_tiny_run_prints_the_table_and_a_json_line():
    out = _run("--systems=ours", "--steps=400", "--rounds=1", "--num_envs=4", "--ceiling_steps=400",
               "--stage_seconds=0.3")  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["medians"]["ours"] > 0 and len(result["runs"]["ours"]) == 1
    assert "| ours |" in out.stdout
    # the machine first, the env-only ceiling of the same run, ours as a fraction of it
    assert out.stdout.startswith("machine: ") and "amx_bf16 " in out.stdout.splitlines()[0]
    assert result["env_only_ceiling"] > 0 and "| env_only |" in out.stdout
    assert result["machine"]["isa"].keys() == {"avx2", "avx512f", "avx512_bf16", "amx_bf16"}
    row = next(line for line in out.stdout.splitlines() if line.startswith("| ours |"))
    assert row.split("|")[3].strip().endswith("%")
    # the per-stage table: each stage's CPU per step and the cap they set
    stages = result["stages"]["ours"]
    assert all(stages[k] > 0 for k in ("env", "inference", "learner"))
    assert stages["cap"] == pytest.approx(
        1e3
        * result["machine"]["usable_cores"]
        / (stages["env"] + stages["inference"] + stages["learner"])
    )
    assert [line for line in out.stdout.splitlines() if line.startswith("| ours |")][1:]


def test_the_forced_dtype_systems_run_the_shipped_files_with_one_dtype_each():
    """``pong_f32`` / ``pong_bf16`` (and ``ours_*``) are the shipped files, which ask for
    ``auto``, with the dtype forced: the rows that check ``auto``'s choice on a CPU."""
    bench = load_benchmark("atari_throughput")
    args = bench.parse_args(["--systems=pong,pong_f32,pong_bf16,ours_bf16", "--num_envs=16"])
    for system, dtype in (("pong_f32", "float32"), ("pong_bf16", "bfloat16"),
                          ("ours_bf16", "bfloat16")):  # fmt: skip
        path, extra, _ = bench.system_flagfile(system, args)
        base_path, base_extra, _ = bench.system_flagfile(system.split("_")[0], args)
        assert path == base_path and base_extra == ()
        assert "--cnn_compute_dtype=auto" in Path(path).read_text().splitlines()
        assert extra == (f"--cnn_compute_dtype={dtype}",)


def test_an_env_count_that_does_not_split_over_the_actor_threads_is_refused():
    """Ours runs ``--num_envs`` in all, split over its flagfile's actor threads (2)."""
    out = _run("--systems=ours", "--num_envs=7")
    assert out.returncode == 2
    assert "--num_envs: 7 does not split over the ours config's 2 actor threads" in out.stderr


def test_a_baseline_tree_without_the_flagfile_is_refused(tmp_path):
    out = _run(f"--baseline_tree={tmp_path}", "--systems=baseline")
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .startswith("error: --baseline_tree/--baseline_flagfile: no flagfile at")
    )


@pytest.mark.long  # the env-only ceiling of a Pong vector first (the suite's time)
@pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("ale_py", "cv2")), reason="atari extra"
)
def test_the_baseline_runs_its_own_trees_trainer(tmp_path):
    """The baseline system runs ``experiments.train`` from ``--baseline_tree`` (a stand-in
    trainer there prints its own figure), with the flagfile's actor count splitting the
    environments."""
    (tmp_path / "experiments" / "configs").mkdir(parents=True)
    (tmp_path / "experiments" / "__init__.py").write_text("")
    (tmp_path / "experiments" / "train.py").write_text(
        "import json, sys\n"
        "envs = [a for a in sys.argv if a.startswith('--num_envs=')]\n"
        "print(json.dumps({'train_sps': 123.0, 'envs': envs}))\n"
    )
    (tmp_path / "experiments" / "configs" / "old.cfg").write_text("--num_actors=2\n")
    out = _run(
        f"--baseline_tree={tmp_path}",
        "--baseline_flagfile=experiments/configs/old.cfg",
        "--systems=baseline",
        "--rounds=2",
        "--num_envs=8",
    )
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["runs"]["baseline"] == [123.0, 123.0]
    assert re.search(r"\| baseline \| 123\.0 \| [\d.]+% \| 2 \| - \| 1\.00x \|", out.stdout)
