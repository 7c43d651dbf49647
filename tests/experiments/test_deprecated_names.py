"""Deprecated setting names (``utils.deprecated.DEPRECATED_NAMES``, e.g. A2C's old
``entropy_start`` / ``entropy_end``) are read as their names now, with one warning line per
name, wherever a name is read: a flagfile, the command line, a ``tv.train`` keyword and an
older run's ``config.json`` on resume. An old name beside its new one in one source is an
error naming the old one."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tfagents_vtrace as tv
from tfagents_vtrace import settings
from tfagents_vtrace.commands.common import rename_deprecated_flags
from tfagents_vtrace.utils import deprecated

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(total_steps=400, num_envs=4, unroll_length=5, eval_every=0, eval_episodes=1)


@pytest.fixture(autouse=True)
def _fresh_warnings():
    deprecated._WARNED.clear()
    yield
    deprecated._WARNED.clear()


def _warnings(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("warning: ")]


def test_every_old_name_maps_to_a_field_of_the_agents():
    owners = settings.setting_owners()
    for old, new in settings.DEPRECATED_NAMES.items():
        assert old not in owners and new in owners, (old, new)


def test_a_keyword_is_renamed_with_one_warning_line_per_name(capsys):
    configs = tv.make_configs("a2c", entropy_start=0.05, entropy_end=0.0)
    assert configs.agent_config.entropy_cost == 0.05
    assert configs.agent_config.entropy_cost_end == 0.0
    tv.make_configs("a3c", entropy_start=0.02)  # once per name and process
    assert _warnings(capsys.readouterr().err) == [
        "warning: entropy_start is deprecated; use entropy_cost",
        "warning: entropy_end is deprecated; use entropy_cost_end",
    ]


def test_an_old_and_a_new_name_together_are_refused():
    with pytest.raises(ValueError, match=r"^entropy_start: deprecated name of entropy_cost, "):
        tv.make_configs("a2c", entropy_start=0.1, entropy_cost=0.2)


def test_a_flagfile_is_renamed_and_keywords_override_it(tmp_path, capsys):
    flagfile = tmp_path / "old.cfg"
    flagfile.write_text("--agent=a2c\n--entropy_start=0.05\n--entropy_end=0.0\n")
    configs = tv.make_configs(flagfile=str(flagfile))
    assert (configs.agent_config.entropy_cost, configs.agent_config.entropy_cost_end) == (0.05, 0)
    assert _warnings(capsys.readouterr().err)[0] == (
        f"warning: --entropy_start is deprecated; use --entropy_cost (in {flagfile})"
    )
    # Another source (the keywords) overrides the file's value, old name or new.
    configs = tv.make_configs(flagfile=str(flagfile), entropy_cost=0.2)
    assert configs.agent_config.entropy_cost == 0.2
    flagfile.write_text("--agent=a2c\n--entropy_start=0.05\n--entropy_cost=0.1\n")
    with pytest.raises(ValueError, match=r"^entropy_start: deprecated name of --entropy_cost"):
        tv.make_configs(flagfile=str(flagfile))


def test_the_command_line_and_its_flagfiles_are_renamed_in_place(tmp_path, capsys):
    flagfile = tmp_path / "old.cfg"
    flagfile.write_text("--agent=a2c\n--entropy_start=0.05\n")
    plain = tmp_path / "plain.cfg"
    plain.write_text("--agent=a2c\n")
    argv = ["train", f"--flagfile={plain}", f"--flagfile={flagfile}", "--entropy_end", "0"]
    out, error = rename_deprecated_flags(argv)
    assert error is None
    # Every flagfile is read in place, once (what follows reads the expanded list), and the
    # old names it holds are renamed.
    assert out == ["train", "--agent=a2c", "--agent=a2c", "--entropy_cost=0.05",
                   "--entropy_cost_end", "0"]  # fmt: skip
    assert len(_warnings(capsys.readouterr().err)) == 2
    # The command line's new name after the file's old one: two sources, the later wins.
    out, error = rename_deprecated_flags(["train", f"--flagfile={flagfile}", "--entropy_cost=1"])
    assert error is None and out[-2:] == ["--entropy_cost=0.05", "--entropy_cost=1"]
    _, error = rename_deprecated_flags(["train", "--entropy_start=1", "--entropy_cost=2"])
    assert error.startswith("--entropy_start: deprecated name of --entropy_cost, which is also")
    _, error = rename_deprecated_flags(["train", "--", "--entropy_start=1"])
    assert error is None


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_train_reads_old_names_from_a_flagfile_and_the_command_line(tmp_path):
    flagfile = tmp_path / "old.cfg"
    flagfile.write_text("--agent=a2c\n--entropy_start=0.03\n")
    logdir = tmp_path / "run"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", f"--flagfile={flagfile}",
         "--entropy_end=0.0", f"--logdir={logdir}", "--export=false",
         *(f"--{k}={v}" for k, v in FAST.items())],
        cwd=ROOT, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert _warnings(out.stderr) == [
        f"warning: --entropy_start is deprecated; use --entropy_cost (in {flagfile})",
        "warning: --entropy_end is deprecated; use --entropy_cost_end",
    ]
    agent_config = json.loads((logdir / "config.json").read_text())["agent_config"]
    assert agent_config["entropy_cost"] == 0.03 and agent_config["entropy_cost_end"] == 0.0


def test_a_run_with_an_old_config_json_resumes(tmp_path, capsys):
    logdir = tmp_path / "run"
    settings_ = dict(FAST, export=False, entropy_cost=0.03, entropy_cost_end=0.0)
    tv.train("a2c", env="CartPole-v1", logdir=str(logdir), **settings_)
    path = logdir / "config.json"
    config = json.loads(path.read_text())
    agent_config = config["agent_config"]  # as an earlier release wrote it
    agent_config["entropy_start"] = agent_config.pop("entropy_cost")
    agent_config["entropy_end"] = agent_config.pop("entropy_cost_end")
    path.write_text(json.dumps(config))
    capsys.readouterr()
    final = tv.train(
        "a2c", env="CartPole-v1", logdir=str(logdir), **{**settings_, "total_steps": 800}
    )
    assert final["resumed"] and final["step"] >= 800
    err = capsys.readouterr().err
    assert f"warning: entropy_start is deprecated; use entropy_cost (in {path})" in err
    assert (
        "changed config (run_config.total_steps" in err
        and "entropy" not in err.split("changed config")[1].splitlines()[0]
    )
