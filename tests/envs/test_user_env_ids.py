"""'module:Env-v0' ids: the module imported by name, and one line that says what to do when
it cannot be."""

import sys

import pytest

from tfagents_vtrace.envs.user_envs import resolve_env


def test_a_module_not_on_the_path_names_pythonpath(tmp_path, monkeypatch):
    (tmp_path / "corridor_mod_xyz.py").write_text(
        "import gymnasium as gym\n"
        "gym.register('CorridorXyz-v0', entry_point='gymnasium.envs.classic_control:CartPoleEnv')\n"
    )
    monkeypatch.chdir(tmp_path)  # the current directory is not searched by the commands
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    with pytest.raises(ValueError, match=r"^env: cannot import 'corridor_mod_xyz' .*PYTHONPATH$"):
        resolve_env("corridor_mod_xyz:CorridorXyz-v0")
    monkeypatch.syspath_prepend(str(tmp_path))  # what the hint says
    assert resolve_env("corridor_mod_xyz:CorridorXyz-v0") == "CorridorXyz-v0"


def test_a_module_whose_own_import_fails_gets_no_pythonpath_hint(tmp_path, monkeypatch):
    (tmp_path / "needs_dep_xyz.py").write_text("import no_such_dependency_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError) as raised:
        resolve_env("needs_dep_xyz:Env-v0")
    message = str(raised.value)
    assert message.startswith("env: cannot import 'needs_dep_xyz'")
    assert "no_such_dependency_xyz" in message and "PYTHONPATH" not in message
