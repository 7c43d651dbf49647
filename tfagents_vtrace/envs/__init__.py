"""Environments: seeded gymnasium factories and the project's own tasks.

Importing this package registers with gymnasium:

* ``CartPoleNoVel-v1``: CartPole-v1 observing ``[x, theta]`` only (partially observed), with
  a numpy vector entry point;
* ``BanditIndependent-v0``, ``BanditDependentUniform-v0``, ``BanditDependentEasy-v0``,
  ``BanditDependentMedium-v0``, ``BanditDependentHard-v0``: two-armed Bernoulli bandit
  episodes of Wang et al., "Learning to reinforcement learn", 2016,
  https://arxiv.org/abs/1611.05763, with a numpy vector entry point;
* ``BanditStructured11-v0``: the same paper's eleven-armed bandit with an informative arm.

``make_vector_env`` / ``make_env`` build seeded environments (NEXT_STEP autoreset), with the
standard Atari preprocessing for ``ALE/*`` ids and MinAtar support for ``MinAtar/*`` ids.
"""

from __future__ import annotations

import gymnasium as gym

from tfagents_vtrace.envs.bandits import (
    EVAL_SEED,
    PROB_SETS,
    TASKS,
    TwoArmedBanditEnv,
    TwoArmedBanditVectorEnv,
    held_out_probs,
    sample_probs,
)
from tfagents_vtrace.envs.cartpole import CartPoleNoVelEnv, CartPoleNoVelVectorEnv
from tfagents_vtrace.envs.factory import (
    MODES,
    EnvSpaces,
    env_action,
    env_spaces,
    make_env,
    make_vector_env,
)
from tfagents_vtrace.envs.structured_bandit import StructuredBanditEnv, StructuredBanditVectorEnv

# Bandit ids and their task family.
BANDIT_IDS: dict[str, str] = {
    "BanditIndependent-v0": "independent",
    "BanditDependentUniform-v0": "dependent_uniform",
    "BanditDependentEasy-v0": "dependent_easy",
    "BanditDependentMedium-v0": "dependent_medium",
    "BanditDependentHard-v0": "dependent_hard",
}

# The eleven-armed structured bandit (10 arms + 1 informative arm, 5 pulls an episode).
STRUCTURED_BANDIT_ID = "BanditStructured11-v0"


def _register() -> None:
    """Registers the ids above with gymnasium (idempotent)."""
    if "CartPoleNoVel-v1" not in gym.registry:
        gym.register(
            id="CartPoleNoVel-v1",
            entry_point="tfagents_vtrace.envs.cartpole:CartPoleNoVelEnv",
            vector_entry_point="tfagents_vtrace.envs.cartpole:CartPoleNoVelVectorEnv",
            max_episode_steps=500,
            reward_threshold=475.0,
        )
    for env_id, task in BANDIT_IDS.items():
        if env_id not in gym.registry:
            gym.register(
                id=env_id,
                entry_point="tfagents_vtrace.envs.bandits:TwoArmedBanditEnv",
                vector_entry_point="tfagents_vtrace.envs.bandits:TwoArmedBanditVectorEnv",
                kwargs={"task": task},
            )
    if STRUCTURED_BANDIT_ID not in gym.registry:
        gym.register(
            id=STRUCTURED_BANDIT_ID,
            entry_point="tfagents_vtrace.envs.structured_bandit:StructuredBanditEnv",
            vector_entry_point="tfagents_vtrace.envs.structured_bandit:StructuredBanditVectorEnv",
        )


_register()

__all__ = [
    "BANDIT_IDS",
    "EVAL_SEED",
    "MODES",
    "PROB_SETS",
    "STRUCTURED_BANDIT_ID",
    "TASKS",
    "CartPoleNoVelEnv",
    "CartPoleNoVelVectorEnv",
    "StructuredBanditEnv",
    "StructuredBanditVectorEnv",
    "TwoArmedBanditEnv",
    "TwoArmedBanditVectorEnv",
    "EnvSpaces",
    "env_action",
    "env_spaces",
    "held_out_probs",
    "make_env",
    "make_vector_env",
    "sample_probs",
]
