"""The project's one flagfile reader (``tfagents_vtrace.utils.flagfiles``): absl's format,
nested flagfiles read in place (beside the file that names them first, else from the current
folder), circles and unreadable files refused with one line, and the command line reading
each flagfile once."""

import builtins
import os
import subprocess
import sys

import pytest

from tfagents_vtrace.commands import config_flags
from tfagents_vtrace.commands.common import rename_deprecated_flags
from tfagents_vtrace.utils.flagfiles import (
    FlagfileError,
    expand_flagfiles,
    flag_texts,
    flagfile_lines,
)


def _write(path, *lines):
    path.write_text("\n".join(lines) + "\n")
    return path


def test_comments_and_blank_lines_are_skipped(tmp_path):
    cfg = _write(tmp_path / "a.cfg", "# a comment", "", "  --env=CartPole-v1  ", "// another",
                 "   ", "--num_envs=4", "  # indented comment")  # fmt: skip
    assert flagfile_lines(cfg) == ["--env=CartPole-v1", "--num_envs=4"]


def test_a_nested_file_is_read_in_place_and_a_later_flag_wins(tmp_path):
    _write(tmp_path / "base.cfg", "--num_envs=4", "--seed=1")
    cfg = _write(tmp_path / "run.cfg", "--seed=0", "--flagfile=base.cfg", "--num_envs=8")
    lines = flagfile_lines(cfg)
    assert lines == ["--seed=0", "--num_envs=4", "--seed=1", "--num_envs=8"]
    assert flag_texts(lines) == {"seed": "1", "num_envs": "8"}
    _write(tmp_path / "single.cfg", "-flagfile=base.cfg")  # one dash, as absl reads it
    assert flagfile_lines(tmp_path / "single.cfg") == ["--num_envs=4", "--seed=1"]


def test_a_nested_path_is_found_beside_the_file_then_from_the_cwd(tmp_path, monkeypatch):
    configs, elsewhere = tmp_path / "configs", tmp_path / "elsewhere"
    configs.mkdir(), elsewhere.mkdir()
    _write(configs / "base.cfg", "--seed=3")
    _write(elsewhere / "cwd_only.cfg", "--num_envs=2")
    cfg = _write(configs / "run.cfg", "--flagfile=base.cfg", "--flagfile=cwd_only.cfg")
    monkeypatch.chdir(elsewhere)  # base.cfg is not here, cwd_only.cfg only here
    assert flagfile_lines(cfg) == ["--seed=3", "--num_envs=2"]
    assert expand_flagfiles(["--flagfile", str(cfg)]) == ["--seed=3", "--num_envs=2"]


def test_a_file_that_includes_itself_is_refused_with_the_chain(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "a.cfg", "--seed=1", "--flagfile=b.cfg")
    _write(tmp_path / "b.cfg", "--flagfile=a.cfg")
    with pytest.raises(FlagfileError) as raised:
        flagfile_lines("a.cfg")
    assert str(raised.value) == "'a.cfg' includes itself (a.cfg -> b.cfg -> a.cfg)"
    _write(tmp_path / "self.cfg", "--flagfile=self.cfg")
    with pytest.raises(FlagfileError, match=r"^'self.cfg' includes itself \(self.cfg -> self"):
        flagfile_lines("self.cfg")


def test_a_file_that_cannot_be_opened_is_one_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FlagfileError) as raised:
        flagfile_lines("nonexistent.cfg")
    assert str(raised.value) == "cannot open 'nonexistent.cfg': No such file or directory"
    with pytest.raises(FlagfileError) as raised:
        flagfile_lines("/")
    assert str(raised.value) == "cannot open '/': Is a directory"
    _write(tmp_path / "outer.cfg", "--flagfile=missing.cfg")
    with pytest.raises(FlagfileError, match=r"^cannot open 'missing.cfg': No such file"):
        expand_flagfiles(["--flagfile=outer.cfg"])
    assert isinstance(raised.value, ValueError)


def test_expand_flagfiles_reads_both_forms_in_place_and_stops_at_a_double_dash(tmp_path):
    cfg = _write(tmp_path / "a.cfg", "--seed=1")
    args = ["--x=0", f"--flagfile={cfg}", "-flagfile", str(cfg), "--flagfile", str(cfg),
            "--y", "--", f"--flagfile={cfg}", "--flagfile"]  # fmt: skip
    assert expand_flagfiles(args) == ["--x=0", "--seed=1", "--seed=1", "--seed=1", "--y", "--",
                                      f"--flagfile={cfg}", "--flagfile"]  # fmt: skip
    for args in (["--flagfile"], ["--x=1", "-flagfile"]):
        with pytest.raises(FlagfileError) as raised:
            expand_flagfiles(args)
        assert str(raised.value) == "missing value"


def test_flag_texts_reads_negated_booleans_by_the_known_names():
    lines = ["--name=a=b", "--flag", "--noexport", "--nodes", "-single=1", "--nothing"]
    assert flag_texts(lines) == {"name": "a=b", "flag": "true", "export": "false",
                                 "des": "false", "single": "1", "thing": "false"}  # fmt: skip
    known = {"export", "nodes", "des"}  # --nodes is "nodes"; "thing" unknown
    assert flag_texts(lines, known) == {"name": "a=b", "flag": "true", "export": "false",
                                        "nodes": "true", "single": "1",
                                        "nothing": "true"}  # fmt: skip
    assert flag_texts(["--no"]) == {"no": "true"}
    for line in ("total_steps=5", "--", "-=1"):
        with pytest.raises(FlagfileError) as raised:
            flag_texts([line])
        assert str(raised.value) == f"expected --name=value, received {line!r}"


def test_the_command_line_reads_each_flagfile_once(tmp_path, monkeypatch):
    base = _write(tmp_path / "base.cfg", "--agent=a2c")
    cfg = _write(tmp_path / "run.cfg", "--flagfile=base.cfg", "--seed=2")
    opened = []
    real_open = builtins.open

    def counting_open(file, *args, **kwargs):
        if os.fspath(file) in (str(base), str(cfg)):
            opened.append(os.path.basename(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", counting_open)
    argv, error = rename_deprecated_flags(["tfv-train", f"--flagfile={cfg}", "--num_envs=4"])
    assert error is None and argv == ["tfv-train", "--agent=a2c", "--seed=2", "--num_envs=4"]
    assert config_flags.agent_from_argv(argv) == "a2c"
    assert opened == ["run.cfg", "base.cfg"]  # once each: what follows reads the expanded list
    assert not any("flagfile" in arg for arg in argv)


def test_rename_deprecated_flags_reports_a_flagfile_it_cannot_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = ["tfv-train", "--flagfile=nonexistent.cfg", "--seed=1"]
    assert rename_deprecated_flags(argv) == (
        argv,
        "--flagfile: cannot open 'nonexistent.cfg': No such file or directory",
    )
    assert config_flags.agent_from_argv(argv) == config_flags.DEFAULT_AGENT


def test_the_reader_imports_neither_tensorflow_nor_absl():
    code = (
        "import sys, tfagents_vtrace.utils.flagfiles; "
        "print(sorted(m for m in ('tensorflow', 'absl') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
