"""The shipped configs' game makers (:mod:`tfagents_vtrace.envs.games`): what they make, the
configs that name them, and the one-line error naming the extra when a package is missing."""

import sys

import gymnasium as gym
import numpy as np
import pytest

import tfagents_vtrace as tv
from tfagents_vtrace.envs import games, turn_games


def test_connect_four_is_one_seat_of_the_game_against_the_named_opponent():
    pytest.importorskip("pettingzoo")
    pytest.importorskip("pygame")
    env = games.connect_four(opponent="random")
    assert isinstance(env, turn_games.TurnGame) and not env.self_play
    assert env.observation_space["observation"].shape == (6, 7, 2)
    assert env.action_space == gym.spaces.Discrete(7)
    obs, _ = env.reset(seed=0)
    done, moves = False, 0
    while not done:
        action = int(np.flatnonzero(obs["action_mask"])[0])
        obs, reward, terminated, truncated, _ = env.step(action)
        done, moves = terminated or truncated, moves + 1
    assert reward in (-1.0, 0.0, 1.0) and 4 <= moves <= 21
    assert games.connect_four().self_play  # self-play by default


def test_simple_spread_is_three_agents_of_mpe2():
    pytest.importorskip("mpe2")
    game = games.simple_spread()
    assert game.possible_agents == ["agent_0", "agent_1", "agent_2"]
    assert game.action_space("agent_0") == gym.spaces.Discrete(5)
    assert len(games.simple_spread(N=2).possible_agents) == 2


@pytest.mark.parametrize(
    "maker,module,extra",
    [
        (games.connect_four, "pettingzoo.classic.connect_four_v3", "pettingzoo"),
        (games.simple_spread, "mpe2.simple_spread_v3", "mpe"),
    ],
)
def test_a_missing_package_is_one_line_naming_the_extra(maker, module, extra, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)  # import raises ModuleNotFoundError
    with pytest.raises(ImportError) as raised:
        maker()
    message = str(raised.value)
    assert "\n" not in message and f"tfagents_vtrace[{extra}]" in message, message


MAKERS = {games.connect_four: ("pettingzoo", ("pygame",)),
          games.simple_spread: ("mpe", ("mpe2", "pettingzoo", "pygame", "scipy"))}  # fmt: skip


@pytest.mark.parametrize("maker", list(MAKERS), ids=lambda m: m.__name__)
def test_only_a_missing_package_the_extra_brings_is_translated(maker, monkeypatch):
    """A ModuleNotFoundError for the game's package or one its extra brings (pygame) is the
    one line naming the extra; any other import error is raised unchanged, traceback and
    all (a module the extra does not bring, an ImportError of a package that is there)."""
    import importlib

    extra, missing = MAKERS[maker]
    raised_here = []

    def import_module(name, error):
        raised_here.append(error)
        raise error

    for name in missing:
        error = ModuleNotFoundError(f"No module named {name!r}", name=name)
        monkeypatch.setattr(importlib, "import_module", lambda m, e=error: import_module(m, e))
        with pytest.raises(ImportError) as raised:
            maker()
        message = str(raised.value)
        assert message.startswith("env: this game needs ") and "\n" not in message, message
        assert f"(No module named {name!r}); install it with" in message, message
        assert message.endswith(f"pip install 'tfagents_vtrace[{extra}]'"), message
        assert raised.value is not error and raised.value.__cause__ is None
    others = [
        ModuleNotFoundError("No module named 'shapely'", name="shapely"),
        ModuleNotFoundError("No module named 'pygamex.base'", name="pygamex.base"),
        ModuleNotFoundError("a module of no name"),
        ImportError("cannot import name 'freetype' from 'pygame'", name="pygame"),
    ]
    for error in others:
        monkeypatch.setattr(importlib, "import_module", lambda m, e=error: import_module(m, e))
        with pytest.raises(ImportError) as raised:
            maker()
        assert raised.value is error  # unchanged: its message and its traceback
        assert "tfagents_vtrace[" not in str(raised.value)
    assert len(raised_here) == len(missing) + len(others)


@pytest.mark.parametrize(
    "name,modules",
    [("impala_connect_four", ("pettingzoo", "pygame")),  # the pettingzoo extra
     ("impala_simple_spread", ("mpe2", "pygame"))],  # the mpe extra
)  # fmt: skip
def test_the_game_configs_name_the_makers(name, modules):
    for module in modules:  # make_configs makes the game to check its spaces
        pytest.importorskip(module)
    configs = tv.make_configs(flagfile=name)
    assert configs.run_config.env_id.startswith("user/tfagents_vtrace.envs.games.")
