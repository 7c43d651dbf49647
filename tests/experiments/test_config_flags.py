"""tfagents_vtrace.commands.config_flags: one flag per config field, with the chosen agent's
defaults.

Ground truth is the config dataclasses themselves (their fields and defaults), not the flag
module's output: every field of every agent has a documented flag; ``--agent=a2c --help``
prints A2C's own defaults; a flag of another agent is refused with a line naming it.
"""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfagents_vtrace.commands import config_flags

ROOT = Path(__file__).resolve().parents[2]


def _all_config_classes():
    from tfagents_vtrace.agents import agent_names, get_agent
    from tfagents_vtrace.envs.family import EnvFamilyConfig
    from tfagents_vtrace.networks import NetworkConfig
    from tfagents_vtrace.runtime.config import RunConfig

    classes = [RunConfig, NetworkConfig, EnvFamilyConfig]
    return classes + [get_agent(n).Config for n in agent_names()]


@pytest.mark.parametrize("cls", _all_config_classes(), ids=lambda c: c.__name__)
def test_every_config_field_is_documented(cls):
    docs = config_flags.field_docs(cls)
    missing = [f.name for f in dataclasses.fields(cls) if len(docs.get(f.name, "")) < 8]
    assert not missing, f"{cls.__name__}: fields without a docstring or comment: {missing}"


def test_field_docs_reads_docstrings_and_comments():
    @dataclasses.dataclass
    class Base:
        # Comment line one
        # and two.
        a: int = 1
        b: float = 2.0
        """Docstring of b."""

    @dataclasses.dataclass
    class Child(Base):
        c: str = "x"
        """Docstring of c."""

    assert config_flags.field_docs(Child) == {
        "a": "Comment line one and two.",
        "b": "Docstring of b.",
        "c": "Docstring of c.",
    }


@pytest.mark.parametrize(
    ("hint", "text", "expected"),
    [
        (int, "12", 12),
        (float | None, "None", None),
        (float | None, "0.5", 0.5),
        (int | None, "none", None),
        (str | None, "lstm", "lstm"),
        (tuple[int, ...], "256,256", (256, 256)),
        (tuple[int, ...] | None, "none", None),
        (tuple[float, float] | None, "-1,1.5", (-1.0, 1.5)),
    ],
)
def test_parser_reads_each_field_type(hint, text, expected):
    base, optional = config_flags.unwrap_optional(hint)
    assert config_flags._ConfigParser(base, optional).parse(text) == expected


def test_parser_error_names_the_expected_type():
    parser = config_flags._ConfigParser(tuple[int, ...], False)
    with pytest.raises(ValueError, match="expected comma-separated ints, received '64,x'"):
        parser.parse("64,x")


def test_agent_is_read_from_the_command_line_and_flagfiles(tmp_path):
    flagfile = tmp_path / "a.cfg"
    flagfile.write_text("--agent=acer\n--discount=0.9\n")
    assert config_flags.agent_from_argv(["train"]) == "impala"
    assert config_flags.agent_from_argv(["train", "--agent=a2c"]) == "a2c"
    assert config_flags.agent_from_argv(["train", "--agent", "a3c"]) == "a3c"
    assert config_flags.agent_from_argv(["train", f"--flagfile={flagfile}"]) == "acer"
    # A later --agent wins over the flagfile's, as absl's own parse does.
    assert config_flags.agent_from_argv(["train", f"--flagfile={flagfile}", "--agent=taac"]) == (
        "taac"
    )


def _help(agent: str, flag: str = "--help") -> str:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", f"--agent={agent}", flag],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert "--learning_rate" in out.stdout, out.stderr[-2000:]  # absl exits 1 after --help
    return out.stdout


def _help_default(text: str, flag: str) -> str:
    match = re.search(rf"--(?:\[no\])?{flag}:.*?\(default: '([^']*)'\)", text, re.S)
    assert match, flag
    return match.group(1)


@pytest.mark.slow  # subprocesses importing TensorFlow
@pytest.mark.parametrize("agent", ["a2c", "acer", "taac"])
def test_help_shows_the_agents_own_defaults(agent):
    from tfagents_vtrace.agents import get_agent

    config = get_agent(agent).Config()
    text = _help(agent)
    for field in ("learning_rate", "discount", "max_nonfinite_updates"):
        assert float(_help_default(text, field)) == getattr(config, field), field
    if agent == "a2c":  # differs from IMPALA's 40 and 6e-4
        assert _help_default(text, "max_grad_norm") == "0.5"
        assert "[taac only]" not in text  # other agents' flags: in --helpfull, saying whose
        assert "[taac only]" in _help(agent, "--helpfull")


@pytest.mark.slow  # a subprocess importing TensorFlow
def test_a_flag_of_another_agent_is_refused(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    out = subprocess.run(
        [sys.executable, "-m", "experiments.train", "--agent=impala",
         f"--logdir={tmp_path / 'run'}", "--num_workers=2"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == (
        "error: --num_workers: not a setting of --agent=impala (it is one of a3c, acer)"
    )
    assert not (tmp_path / "run").exists()
