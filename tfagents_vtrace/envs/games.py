"""Makers of the multi-agent games of the shipped configs, for ``--env=`` and ``env=``.

* :func:`connect_four`: PettingZoo's ``connect_four_v3`` (the ``pettingzoo`` extra) as one
  seat of a turn-by-turn game (:class:`~tfagents_vtrace.envs.turn_games.TurnGame`), against
  ``opponent`` (``"self"``: the run's snapshots, self-play; ``"random"``, ``"lookahead"``).
  ``configs/impala_connect_four.cfg`` trains it.
* :func:`simple_spread`: ``simple_spread_v3`` of ``mpe2`` (PettingZoo's successor package for
  the multi-agent particle environments, the ``mpe`` extra) as a parallel game whose agents
  share one policy (:mod:`~tfagents_vtrace.envs.multi_agent`).
  ``configs/impala_simple_spread.cfg`` trains it.

Each imports its package when called, with a one-line error naming the extra when the
package, or one the extra brings with it, is missing.
Results: docs/results/multi_agent.md.
"""

from __future__ import annotations

from typing import Any

from tfagents_vtrace.envs.turn_games import SELF, TurnGame


def _needs(module: str, extra: str, brings: tuple[str, ...] = ()):
    """``module`` imported; a one-line ``ImportError`` naming ``extra`` when the module that
    is missing is ``module``'s top package or one of ``brings`` (the packages ``extra``
    installs with it). Any other import error (a module the extra does not bring, a package
    that fails while it imports) is raised as it is, with its traceback."""
    import importlib

    top = module.split(".")[0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in (top, *brings):
            raise
        raise ImportError(
            f"env: this game needs {top} ({e}); install it with "
            f"pip install 'tfagents_vtrace[{extra}]'"
        ) from None


def connect_four(opponent: Any = SELF, seat: str = "alternate", **game_kwargs: Any) -> TurnGame:
    """Connect Four (``pettingzoo.classic.connect_four_v3``) for one policy in either seat
    (``seat="alternate"``: the seats swap every episode), ``opponent`` playing the other."""
    # the pettingzoo extra brings pygame (pygame-ce), which the classic games import
    game = _needs("pettingzoo.classic.connect_four_v3", "pettingzoo", ("pygame",))
    return TurnGame(game.env, opponent=opponent, seat=seat, **game_kwargs)


def simple_spread(N: int = 3, **game_kwargs: Any):  # noqa: N803 (mpe2's keyword)
    """``simple_spread_v3.parallel_env(N=N, **game_kwargs)`` of ``mpe2``: ``N`` agents
    cover ``N`` landmarks, 25 steps, discrete moves."""
    # the mpe extra brings mpe2's requirements: PettingZoo, pygame (pygame-ce), SciPy
    game = _needs("mpe2.simple_spread_v3", "mpe", ("pettingzoo", "pygame", "scipy"))
    return game.parallel_env(N=N, **game_kwargs)
