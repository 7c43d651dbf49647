"""The console scripts of an installed wheel work outside the clone.

A wheel of the working tree is installed (not editable) into a temporary venv whose only
other entry on ``sys.path`` is the project venv's site-packages, added by a ``.pth`` line:
the dependencies (TensorFlow...) are reused, but that directory's own ``.pth`` files, among
them the editable install's finder that maps ``tfagents_vtrace`` to the clone, are not run.
The commands then run from an empty directory outside the clone, without ``PYTHONPATH``:
``tfv-train --config=NAME`` (a shipped config, package data), ``tfv-evaluate``,
``tfv-export`` and ``tfv-plot``; ``tfv-train --help`` groups its flags; bad flags end with
one line and exit code 2, as ``python -m experiments.train`` does (``test_flag_errors``).
"""

import fcntl
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.experiments.test_flag_errors import TRAIN_CASES, _assert_one_line

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ("tfv-train", "tfv-evaluate", "tfv-export", "tfv-plot", "tfv-benchmark")
SOURCES = ("setup.cfg", "pyproject.toml", "README.md", "tfagents_vtrace")


def _build(root: Path) -> Path:
    """Builds a wheel of the working tree and installs it into ``root/venv``; returns the
    venv's bin directory."""
    for part in ("src", "dist", "venv"):  # what a failed build of another worker left
        shutil.rmtree(root / part, ignore_errors=True)
    src = root / "src"
    src.mkdir()
    for name in SOURCES:  # a copy: the setuptools build writes build/ and *.egg-info beside
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(ROOT / name, src / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
         "-w", str(root / "dist"), str(src)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    [wheel] = (root / "dist").glob("tfagents_vtrace-*.whl")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    # A path line only: Python does not process the .pth files of a directory added so.
    Path(purelib, "project_venv_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(  # pip comes from the project venv; --ignore-installed: its editable
        [python, "-m", "pip", "--disable-pip-version-check", "install", "--no-deps",
         "--no-index", "--ignore-installed", "-q", str(wheel)],  # install is not ours
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    return venv / "bin"


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """The bin directory of the temporary venv, built once per test session (xdist workers
    share it through the session's base temporary directory)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "installed_wheel"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "done").exists():
            bin_dir = _build(root)
            (root / "done").write_text(str(bin_dir))
    return Path((root / "done").read_text())


@pytest.fixture
def outside(tmp_path) -> Path:
    """An empty working directory outside the clone."""
    work = tmp_path / "work"
    work.mkdir()
    assert ROOT not in work.resolve().parents
    return work


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return dict(env, TF_CPP_MIN_LOG_LEVEL="3")


def _run(bin_dir: Path, command: str, *args: str, cwd: Path, timeout: float = 180):
    return subprocess.run(
        [str(bin_dir / command), *args],
        cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def test_the_commands_import_the_wheels_copy(installed, outside):
    code = (  # where the commands' modules are found, without running them (no TensorFlow)
        "import importlib.metadata as md, importlib.util, json, sys\n"
        "train = importlib.util.find_spec('tfagents_vtrace.commands.train').origin\n"
        "print(json.dumps({'package': train, 'path': sys.path,\n"
        "    'experiments': importlib.util.find_spec('experiments') is not None,\n"
        "    'finders': [type(f).__module__ for f in sys.meta_path],\n"
        "    'scripts': sorted(e.name for e in md.entry_points(group='console_scripts')\n"
        "                      if e.value.startswith('tfagents_vtrace.'))}))"
    )
    out = subprocess.run(
        [str(installed / "python"), "-c", code],
        cwd=outside, env=_env(), capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    site = installed.parent / "lib"
    assert Path(seen["package"]).is_relative_to(site), seen["package"]
    assert not seen["experiments"]
    deps = Path(sysconfig.get_paths()["purelib"]).resolve()  # the project venv's, maybe in ROOT
    in_clone = [p for p in seen["path"] if Path(p or outside).resolve().is_relative_to(ROOT)]
    assert all(Path(p).resolve() == deps for p in in_clone), seen["path"]
    assert not any("editable" in f for f in seen["finders"]), seen["finders"]
    assert seen["scripts"] == sorted(COMMANDS)
    for command in COMMANDS:  # the scripts run the temporary venv's interpreter
        first = (installed / command).read_text().splitlines()[0]
        assert first == f"#!{installed / 'python'}", first


@pytest.mark.slow  # four TensorFlow subprocesses, one of them a short training run
def test_the_commands_run_outside_the_clone(installed, outside):
    start = time.monotonic()
    train = _run(
        installed, "tfv-train", "--config=impala_cartpole", "--logdir=runs/cp",
        "--total_steps=3000", "--eval_episodes=2", cwd=outside,
    )  # fmt: skip
    assert train.returncode == 0, train.stderr[-2000:]
    final = json.loads(train.stdout.strip().splitlines()[-1])
    assert final["final"] is True and final["step"] >= 3000
    config = json.loads((outside / "runs/cp/config.json").read_text())
    assert config["agent_config"]["learning_rate"] == 0.001  # the shipped config's
    assert config["run_config"]["total_steps"] == 3000  # a later flag overrides it

    evaluate = _run(
        installed, "tfv-evaluate", "--policy=runs/cp/policy", "--env=CartPole-v1",
        "--episodes=2", cwd=outside,
    )  # fmt: skip
    assert evaluate.returncode == 0, evaluate.stderr[-2000:]
    assert json.loads(evaluate.stdout.strip().splitlines()[-1])["episodes"] == 2

    if all(importlib.util.find_spec(m) for m in ("tf2onnx", "onnxruntime")):
        export = ["--output=out.onnx", "--format=onnx", "--check"]
    else:  # the onnx extra is not installed: the SavedModel export
        export = ["--output=policy_copy", "--check"]
    exported = _run(installed, "tfv-export", "--logdir=runs/cp", *export, cwd=outside)
    assert exported.returncode == 0, exported.stderr[-2000:]
    assert json.loads(exported.stdout.strip().splitlines()[-1])["passed"] is True
    assert (outside / export[0].partition("=")[2]).exists()

    plot = _run(installed, "tfv-plot", "--logdir=runs/cp", "--output=curves.png", cwd=outside)
    assert plot.returncode == 0, plot.stderr[-2000:]
    assert (outside / "curves.png").stat().st_size > 0
    print(f"train, evaluate, export, plot: {time.monotonic() - start:.1f} s")


@pytest.mark.slow  # TensorFlow subprocesses
def test_train_help_groups_the_flags(installed, outside):
    out = _run(installed, "tfv-train", "--help", cwd=outside)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    headings = ["main flags:", "run flags:", "network flags:", "impala flags (--agent=impala):"]
    positions = [text.find(f"\n{h}\n") for h in headings]
    assert all(p > 0 for p in positions) and positions == sorted(positions), positions
    main = text[positions[0] : positions[1]]
    for flag in ("config", "agent", "env", "logdir", "total_steps", "seed", "num_envs",
                 "learning_rate", "eval_every", "stop_return", "[no]overwrite"):  # fmt: skip
        assert f"\n  --{flag}:" in main, flag
    assert "impala_cartpole" in text  # the shipped configs are named
    assert "--vtrace_lambda:" in text and "--num_workers" not in text  # a3c's / acer's
    full = _run(installed, "tfv-train", "--helpfull", cwd=outside)
    assert full.returncode == 0 and "--num_workers" in full.stdout


@pytest.mark.slow  # a TensorFlow subprocess each
@pytest.mark.parametrize("case", ["int", "other_agent", "no_config"])
def test_bad_flags_of_the_console_script_are_one_line(installed, outside, case):
    """One case of each way a flag error ends: absl's parse (``int``), the command's own
    checks (``other_agent``; ``out_of_range``, ``unknown_agent`` and ``unknown_env`` end so
    too) and the ``--config`` expansion before both. ``test_flag_errors`` runs every case
    through ``python -m experiments.train``, which runs the same ``entry_point()``."""
    args, expected = TRAIN_CASES[case]
    out = _run(installed, "tfv-train", "--logdir=run", *args, cwd=outside)
    _assert_one_line(out, expected)
    assert not (outside / "run").exists()


def test_benchmark_outside_the_clone_says_where_the_scripts_are(installed, outside):
    out = _run(installed, "tfv-benchmark", "--list", cwd=outside)
    _assert_one_line(out, "error: --dir: no directory 'benchmarks': the benchmarks come with")
