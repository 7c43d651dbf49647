"""Makers of the multi-agent games of the shipped configs, for ``--env=`` and ``env=``.

* :func:`connect_four`: PettingZoo's ``connect_four_v3`` (the ``pettingzoo`` extra) as one
  seat of a turn-by-turn game (:class:`~tfagents_vtrace.envs.turn_games.TurnGame`), against
  ``opponent`` (``"self"``: the run's snapshots, self-play; ``"random"``, ``"lookahead"``).
  ``configs/impala_connect_four.cfg`` trains it.
* :func:`simple_spread`: ``simple_spread_v3`` of ``mpe2`` (PettingZoo's successor package for
  the multi-agent particle environments, the ``mpe`` extra) as a parallel game whose agents
  share one policy (:mod:`~tfagents_vtrace.envs.multi_agent`).
  ``configs/impala_simple_spread.cfg`` trains it.

Each imports its package when called, with a one-line error naming the extra when missing.
Results: docs/results/multi_agent.md.
"""

from __future__ import annotations

from typing import Any

from tfagents_vtrace.envs.turn_games import SELF, TurnGame


def _needs(module: str, extra: str):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"env: this game needs {module.split('.')[0]} ({e}); install it with "
            f"pip install 'tfagents_vtrace[{extra}]'"
        ) from None


def connect_four(opponent: Any = SELF, seat: str = "alternate", **game_kwargs: Any) -> TurnGame:
    """Connect Four (``pettingzoo.classic.connect_four_v3``) for one policy in either seat
    (``seat="alternate"``: the seats swap every episode), ``opponent`` playing the other."""
    game = _needs("pettingzoo.classic.connect_four_v3", "pettingzoo")
    return TurnGame(game.env, opponent=opponent, seat=seat, **game_kwargs)


def simple_spread(N: int = 3, **game_kwargs: Any):  # noqa: N803 (mpe2's keyword)
    """``simple_spread_v3.parallel_env(N=N, **game_kwargs)`` of ``mpe2``: ``N`` agents
    cover ``N`` landmarks, 25 steps, discrete moves."""
    game = _needs("mpe2.simple_spread_v3", "mpe")
    return game.parallel_env(N=N, **game_kwargs)
