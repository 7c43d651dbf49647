"""Every flag error of the entry points is one line, ``error: --FLAG: ...``, and exit code 2.

absl's own parsing errors (a value of the wrong type, an unknown flag, a missing flagfile or
required flag) included, which absl alone reports in two lines with exit code 1
(``tfagents_vtrace.commands.cli.run``); ``--help`` exits 0. Each case is a subprocess, as a
user runs it.
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# TensorFlow's C++ start-up log (oneDNN, CUDA probing) goes to stderr before Python runs a
# line of ours, whatever TF_CPP_MIN_LOG_LEVEL says: not part of what the program reports.
TF_LOG = re.compile(r"[IWEF]\d{4} [\d:.]+ +\d+ \S+:\d+\] |WARNING: All log messages before absl::")


def _run(module, *args):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-m", f"experiments.{module}", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip


def _assert_one_line(out, expected: str) -> None:
    lines = [line for line in out.stderr.splitlines() if line.strip() and not TF_LOG.match(line)]
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(lines) == 1, out.stderr[-2000:]
    assert lines[0].startswith("error: --"), lines[0]
    assert lines[0].startswith(expected), lines[0]


TRAIN_CASES = {
    "int": (["--total_steps=abc"], "error: --total_steps: expected int, received 'abc'"),
    "float": (["--learning_rate=abc"], "error: --learning_rate: expected float, received 'abc'"),
    "out_of_range": (
        ["--total_steps=-5"],
        "error: --total_steps: expected an int >= 1, received -5",
    ),
    "unknown_agent": (["--agent=nope"], "error: --agent: expected one of ("),
    "unknown_env": (["--env=NoSuchEnv-v9"], "error: --env: 'NoSuchEnv-v9' is not a registered"),
    "other_agent": (
        ["--num_workers=2"],
        "error: --num_workers: not a setting of --agent=impala (it is one of a3c, acer)",
    ),
    "missing_flagfile": (
        ["--flagfile=nonexistent.cfg"],
        "error: --flagfile: cannot open 'nonexistent.cfg': No such file or directory",
    ),
    "unknown_flag": (["--totl_steps=3"], "error: --totl_steps: unknown flag (did you mean"),
    "no_config": (["--config=nope"], "error: --config: no shipped config 'nope' (available: "),
    "minibatches_do_not_split": (
        ["--num_envs=6"],
        "error: --num_minibatches: a batch of 6 columns (num_envs=6 x 1 unroll) does not "
        "split into 4 equal minibatches",
    ),
    "deprecated_beside_new": (
        ["--agent=a2c", "--entropy_start=0.1", "--entropy_cost=0.2"],
        "error: --entropy_start: deprecated name of --entropy_cost, which is also given; keep "
        "--entropy_cost only",
    ),
}


@pytest.mark.slow  # subprocesses importing TensorFlow (~2-4 s each)
@pytest.mark.parametrize("case", TRAIN_CASES)
def test_train_flag_errors_are_one_line(tmp_path, case):
    args, expected = TRAIN_CASES[case]
    out = _run("train", f"--logdir={tmp_path / 'run'}", *args)
    _assert_one_line(out, expected)
    assert not (tmp_path / "run").exists()  # refused before anything is written


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_train_without_its_required_logdir_is_one_line():
    _assert_one_line(_run("train"), "error: --logdir: required, but not given")


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_train_help_exits_0():
    out = _run("train", "--help")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "--total_steps" in out.stdout and "\nmain flags:\n" in out.stdout


# The other entry points parse their flags before importing TensorFlow: ~0.2 s each.
OTHER_CASES = [
    ("evaluate", ["--policy=p", "--env=e", "--episodes=abc"],
     "error: --episodes: expected an integer, received 'abc'"),
    ("evaluate", [], "error: --policy: required, but not given; --env: required"),
    ("evaluate", ["--policy=p", "--env=e", "--bogus"], "error: --bogus: unknown flag"),
    ("export", ["--logdir=d", "--format=bad"],
     "error: --format: expected one of saved_model, tflite, onnx, received 'bad'"),
    ("export", ["--logdir=d", "--overwrite=maybe"],
     "error: --overwrite: expected true or false, received 'maybe'"),
    ("export", ["--flagfile=nonexistent.cfg"], "error: --flagfile: cannot open 'nonexistent.cfg'"),
    ("plot", [], "error: --logdir: required, but not given"),
    ("plot", ["--logdir=d", "--logdir"], "error: --logdir: missing value"),
    ("benchmark", ["--bogus"], "error: --bogus: unknown flag"),
    ("benchmark", ["--flagfile"], "error: --flagfile: missing value"),
]  # fmt: skip


@pytest.mark.parametrize(
    "module, args, expected",
    OTHER_CASES,
    ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(OTHER_CASES)],
)
def test_other_entry_points_flag_errors_are_one_line(module, args, expected):
    _assert_one_line(_run(module, *args), expected)


@pytest.mark.parametrize("module", ["evaluate", "export", "plot", "benchmark"])
def test_help_exits_0(module):
    for flag in ("--help", "--helpfull"):
        out = _run(module, flag)
        assert out.returncode == 0, (flag, out.stderr[-2000:])
        assert "flags:" in out.stdout, flag


def test_flag_error_message_squeezes_what_absl_raises():
    from absl import flags

    from tfagents_vtrace.commands.cli import flag_error_message

    values = flags.FlagValues()
    flags.DEFINE_integer("count", 1, "", lower_bound=0, flag_values=values)
    flags.DEFINE_enum("mode", "x", ["x", "y"], "", flag_values=values)
    flags.DEFINE_string("a", None, "", flag_values=values)
    flags.DEFINE_string("b", None, "", flag_values=values)
    flags.mark_flags_as_required(["a", "b"], flag_values=values)
    cases = [
        (["--count=1.5", "--a=x", "--b=y"], "--count: expected an integer, received '1.5'"),
        (["--count=-1", "--a=x", "--b=y"], "--count: -1 is not a non-negative integer"),
        (["--mode=z", "--a=x", "--b=y"], "--mode: expected one of x, y, received 'z'"),
        (["--nope=1"], "--nope: unknown flag"),
        ([], "--a: required, but not given; --b: required, but not given"),
        (["--count"], "--count: missing value"),
        (["--flagfile=/"], "--flagfile: cannot open '/': Is a directory"),
    ]  # fmt: skip
    for argv, expected in cases:
        values.unparse_flags()
        with pytest.raises(flags.Error) as error:
            values(["prog", *argv])
        message = flag_error_message(error.value, values)
        assert message == expected and "\n" not in message


# ------------------------------------------------------- stray positional arguments, --config
# A positional argument is one line naming it, exit code 2, for every command: absl hands it
# to main, which ignored it (`tfv-train --config=impala_cartpole total_steps=5` trained for
# the config's 1,000,000 steps).
STRAY_CASES = [
    ("train", ["--config=impala_cartpole", "total_steps=5"],
     "error: 'total_steps=5': unexpected argument (flags are written --NAME=VALUE; did you "
     "mean --total_steps=5?)"),
    ("train", ["--agent=impala", "--", "--total_steps=5"],
     "error: '--total_steps=5': unexpected argument (flags are written --NAME=VALUE; flags "
     "after -- are not read"),
    ("evaluate", ["--policy=p", "--env=e", "episodes=3"],
     "error: 'episodes=3': unexpected argument (flags are written --NAME=VALUE; did you mean "
     "--episodes=3?)"),
    ("export", ["--logdir=d", "out.onnx"], "error: 'out.onnx': unexpected argument"),
    ("plot", ["--logdir=d", "runs/a", "runs/b"], "error: 'runs/a', 'runs/b': unexpected"),
    ("benchmark", ["--name=ops_bench", "samples=40"],
     "error: 'samples=40': unexpected argument (flags are written --NAME=VALUE; arguments for "
     "the program run go after --)"),
]  # fmt: skip


@pytest.mark.parametrize(
    "module, args, expected",
    STRAY_CASES,
    ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(STRAY_CASES)],
)
def test_a_stray_positional_argument_is_one_line(tmp_path, module, args, expected):
    if module == "train":
        args = [f"--logdir={tmp_path / 'run'}", *args]
    out = _run(module, *args)
    lines = [line for line in out.stderr.splitlines() if line.strip() and not TF_LOG.match(line)]
    assert out.returncode == 2, out.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(expected), out.stderr[-2000:]
    assert not (tmp_path / "run").exists()  # refused before anything is written


def test_the_arguments_after_dashes_reach_a_benchmark_only():
    from tfagents_vtrace.commands.cli import positional_error

    argv = ["tfv-benchmark", "--name=x", "--", "--samples=3", "more"]
    assert positional_error(argv, ["tfv-benchmark", "--samples=3", "more"], True) == (
        None,
        ["tfv-benchmark", "--samples=3", "more"],
    )
    error, _ = positional_error(argv, ["tfv-benchmark", "--samples=3", "more"], False)
    assert error.startswith("'--samples=3', 'more': unexpected arguments")
    # before the --, a positional argument is refused even where arguments pass through
    argv = ["tfv-benchmark", "stray", "--", "--samples=3"]
    error, _ = positional_error(argv, ["tfv-benchmark", "stray", "--samples=3"], True)
    assert error.startswith("'stray': unexpected argument")
    assert positional_error(["p", "--a=1"], ["p"], False) == (None, ["p"])
    error, _ = positional_error(["p", "-", "x", "y", "z", "v", "w"], ["p", "-", *"xyzvw"])
    assert error.startswith("'-', 'x', 'y', 'z', 'v', ...: unexpected arguments")


CONFIG_CASES = {
    "traversal_to_an_existing_file": ("../../etc/passwd", "'../../etc/passwd' is not a .cfg"),
    "absolute_path_not_cfg": ("/etc/passwd", "'/etc/passwd' is not a .cfg flagfile"),
    "traversal_to_a_missing_cfg": ("../../etc/passwd.cfg", "no file '../../etc/passwd.cfg'"),
    "traversal_inside_a_name": ("impala_cartpole/../../../x", "no file 'impala_cartpole/.."),
    "a_hidden_name": (".impala_cartpole", "no shipped config '.impala_cartpole' (available:"),
    "dots": ("..", "no shipped config '..' (available:"),
    "a_directory": ("tfagents_vtrace/configs", "no file 'tfagents_vtrace/configs'"),
}


@pytest.mark.parametrize("case", CONFIG_CASES)
def test_config_names_cannot_leave_the_configs_folder(case, tmp_path, monkeypatch):
    from tfagents_vtrace.api import config_path
    from tfagents_vtrace.commands.common import expand_config

    # '../../etc/passwd' must name a file wherever the suite runs (a clone may sit at any depth)
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "passwd").write_text("root:x:0:0\n")
    (tmp_path / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "a" / "b")
    name, expected = CONFIG_CASES[case]
    with pytest.raises(ValueError, match=r"^config: "):
        config_path(name)
    argv, error = expand_config(["train", f"--config={name}", "--total_steps=5"])
    assert error is not None and error.startswith(f"--config: {expected}"), error
    assert argv == ["train", f"--config={name}", "--total_steps=5"]  # left for absl to refuse


def test_a_cfg_path_and_a_shipped_name_are_read(tmp_path, monkeypatch):
    from tfagents_vtrace.api import CONFIG_DIR, config_path

    mine = tmp_path / "mine.cfg"
    mine.write_text("--total_steps=5\n")
    assert config_path(str(mine)) == str(mine)
    assert config_path("impala_cartpole") == os.path.join(CONFIG_DIR, "impala_cartpole.cfg")
    assert config_path("impala_cartpole.cfg") == os.path.join(CONFIG_DIR, "impala_cartpole.cfg")
    monkeypatch.chdir(tmp_path)  # a .cfg file of the working directory, by its bare name
    assert config_path("mine.cfg") == "mine.cfg"
    assert config_path(os.path.join("..", tmp_path.name, "mine.cfg")).endswith("mine.cfg")
    (tmp_path / "flags").write_text("--total_steps=5\n")
    with pytest.raises(ValueError, match=r"^config: no file 'flags' and no shipped config"):
        config_path("flags")  # a bare name without .cfg is a shipped config's name


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_train_refuses_a_config_outside_the_configs_folder(tmp_path):
    out = _run("train", f"--logdir={tmp_path / 'run'}", "--config=../../../../../etc/passwd")
    _assert_one_line(out, "error: --config: '../../../../../etc/passwd' is not a .cfg flagfile")
    assert not (tmp_path / "run").exists()
