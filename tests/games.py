"""``examples/relay_game.py`` (the game of many agents users copy) as ``tests.games`` (the
command line's ``--env=tests.games:make_relay`` in the tests), loaded by its path."""

import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[1] / "examples" / "relay_game.py"
_spec = importlib.util.spec_from_file_location("relay_game", _PATH)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

Relay = _module.Relay
best_returns = _module.best_returns


def make_relay(**kwargs):
    """``relay_game.make_relay`` from a module a Ray worker can import (``tests.games``)."""
    return Relay(**kwargs)


UnevenRelay = _module.UnevenRelay


def make_uneven(**kwargs):
    return UnevenRelay(**kwargs)


def make_mirror(**kwargs):
    return Relay(mirror=True, **kwargs)


class _Faulty(UnevenRelay):
    """An ``UnevenRelay`` that goes wrong from the game's ``at``-th step: ``how="raise"``
    raises there, ``how="nan"`` gives agent a a NaN reward."""

    def __init__(self, at: int, how: str, **kwargs):
        super().__init__(**kwargs)
        self.at, self.how, self.steps = at, how, 0

    def step(self, actions):
        self.steps += 1
        if self.steps >= self.at and self.how == "raise":
            raise ZeroDivisionError("the game broke")
        obs, rewards, *rest = super().step(actions)
        if self.steps >= self.at and "a" in rewards:
            rewards = {**rewards, "a": float("nan")}
        return (obs, rewards, *rest)


def make_breaking(**kwargs):
    """A game of two groups (``UnevenRelay``) that raises in its 100th step."""
    return _Faulty(100, "raise", **kwargs)


def make_nan_reward(**kwargs):
    """A game of two groups (``UnevenRelay``) whose agent a's reward turns NaN at step 40."""
    return _Faulty(40, "nan", **kwargs)
