"""Settings of one environment family (Atari, the bandits), the environment layer's own.

:class:`EnvFamilyConfig` holds the settings that only some environment ids take; each is a
``tfv-train`` flag (and ``tv.train`` setting) of the same name, and
:meth:`EnvFamilyConfig.env_kwargs` turns them into the constructor arguments of an id's
environments (``RunConfig.env_kwargs``, what the actors, the evaluator and the network
builder pass to :func:`~tfagents_vtrace.envs.factory.make_env` /
:func:`~tfagents_vtrace.envs.factory.make_vector_env`). A setting given for an id that does
not take it is an error naming it, not a setting that silently does nothing.
"""

from __future__ import annotations

import dataclasses

from tfagents_vtrace.utils.validation import check_int, check_number


@dataclasses.dataclass(frozen=True)
class EnvFamilyConfig:
    """Settings of the Atari and bandit environments; None keeps the environment's own."""

    num_trials: int | None = None
    """Bandit environments only: pulls per episode (one bandit problem); None keeps the
    environment's 100 (Wang et al. 2016)."""
    screen_size: int | None = None
    """Atari (ALE/*) only: side of the square greyscale frames; None keeps 84 (42 is the
    A3C meta-RL fork's, for ``--torso=universe_cnn``)."""
    repeat_action_probability: float | None = None
    """Atari (ALE/*) only: sticky actions, the probability in [0, 1] that ALE repeats the
    previous action on each frame; None keeps the id's (0.25 for v5, as Machado et al. 2018
    recommend; 0 is the deterministic protocol of ``PongNoFrameskip-v4``-style results)."""

    agent_ids: bool = False
    """Games of many agents (PettingZoo, :mod:`tfagents_vtrace.envs.multi_agent`) only: each
    agent's observation carries its one-hot index, so that agents sharing one policy can act
    differently."""

    def __post_init__(self) -> None:
        for name in ("num_trials", "screen_size"):
            if getattr(self, name) is not None:
                check_int(name, getattr(self, name), 1)
        p = self.repeat_action_probability
        if p is not None:
            check_number("repeat_action_probability", p, 0.0, 1.0, False, False)
            object.__setattr__(self, "repeat_action_probability", float(p))

    def env_kwargs(self, env_id: str) -> dict:
        """The constructor arguments of ``env_id``'s environments: the settings that are not
        None.

        Raises:
          ValueError: naming the setting, when ``env_id`` does not take it.
        """
        from tfagents_vtrace.envs import BANDIT_IDS
        from tfagents_vtrace.envs.factory import _family
        from tfagents_vtrace.envs.multi_agent import is_game_id

        atari = (_family(env_id) == "atari", "Atari ids (ALE/*)")
        games = (is_game_id(env_id), "games of many agents (PettingZoo)")
        bandits = (env_id in BANDIT_IDS, f"the bandit ids {list(BANDIT_IDS)}")
        takes = {
            "num_trials": bandits,
            "screen_size": atari,
            "repeat_action_probability": atari,
            "agent_ids": games,
        }
        kwargs = {}
        for name, (applies, which) in takes.items():
            value = getattr(self, name)
            if value is None or value is False:
                continue
            if not applies:
                raise ValueError(f"{name}: only {which} take it; env_id is {env_id!r}")
            kwargs[name] = value
        return kwargs

    @classmethod
    def from_env_kwargs(cls, env_kwargs: dict, env_id: str) -> dict:
        """``env_kwargs`` (e.g. read from a run's ``config.json``) checked as settings of
        ``env_id``: ``cls(**env_kwargs).env_kwargs(env_id)``.

        Raises:
          ValueError: naming the argument, when it is no setting of this class, out of range
            or not taken by ``env_id``.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        for name in env_kwargs:
            if name not in names:
                raise ValueError(f"{name}: not an environment setting ({sorted(names)})")
        return cls(**env_kwargs).env_kwargs(env_id)
