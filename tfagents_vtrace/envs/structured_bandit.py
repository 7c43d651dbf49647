"""The eleven-armed structured bandit of Wang et al., "Learning to reinforcement learn", 2016.

https://arxiv.org/abs/1611.05763, section 3.1 ("bandits with dependent arms"), as we read it:
each episode hides a *target* among arms ``0 .. K-1`` (``K = 10``, drawn uniformly at reset);
pulling the target pays ``target_reward`` (5), any other of those arms pays ``other_reward``
(1), and the extra *informative* arm ``K`` always pays ``info_scale * (target + 1)`` (0.1 x the
target's 1-based index). An episode has ``num_trials`` pulls (5). Rewards are deterministic,
so one pull of the informative arm reveals the target: the Bayes-optimal policy sacrifices
the first pull to it and exploits afterwards, which a meta-learner must discover (an
independent-arms bandit algorithm cannot). ``reset(options={"target": k})`` fixes the target.

``info``: ``expected_regret`` (``target_reward`` minus the pulled arm's payoff),
``cumulative_regret``, ``trial`` and ``target``. Observations are constant ``zeros(1)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import Env

from tfagents_vtrace.envs.bandits import BanditVectorEnv


class StructuredBanditVectorEnv(BanditVectorEnv):
    """``num_envs`` eleven-armed structured bandits (:class:`BanditVectorEnv`), problems
    ``target`` ``[B]``: ``reset(options={"target": k})`` (an int or ``[B]`` ints) fixes them."""

    PROBLEM = "target"

    def __init__(
        self,
        num_envs: int = 1,
        num_targets: int = 10,
        num_trials: int = 5,
        target_reward: float = 5.0,
        other_reward: float = 1.0,
        info_scale: float = 0.1,
    ):
        if num_targets < 2:
            raise ValueError(f"num_targets: expected >= 2, received {num_targets}")
        if num_trials < 1:
            raise ValueError(f"num_trials: expected >= 1, received {num_trials}")
        self.num_targets = num_targets
        self.target_reward = float(target_reward)
        self.other_reward = float(other_reward)
        self.info_scale = float(info_scale)
        super().__init__(num_envs, num_trials, num_targets + 1, np.zeros(num_envs, np.int64))

    def payoff(self, actions: np.ndarray) -> np.ndarray:
        """Deterministic payoff ``[B]`` of ``actions [B]`` given the current targets."""
        info_arm = actions == self.num_targets
        hit = actions == self.target
        pay = np.where(hit, self.target_reward, self.other_reward)
        return np.where(info_arm, self.info_scale * (self.target + 1), pay)

    def _draw(self, n: int) -> np.ndarray:
        return self.np_random.integers(0, self.num_targets, n)

    def _given(self, value: Any) -> np.ndarray:
        target = np.broadcast_to(np.asarray(value, np.int64), (self.num_envs,))
        if np.any((target < 0) | (target >= self.num_targets)):
            raise ValueError(
                f"options['target']: expected ints in [0, {self.num_targets}), "
                f"received {target.tolist()}"
            )
        return target.copy()

    def _pull(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Arms in ``[0, num_targets]``; the deterministic :meth:`payoff`."""
        if np.any((a < 0) | (a > self.num_targets)):
            raise ValueError(f"actions: expected ints in [0, {self.num_targets}], got {a.tolist()}")
        reward = self.payoff(a.astype(np.int64)).astype(np.float32)
        return reward, self.target_reward - reward.astype(np.float64)


class StructuredBanditEnv(Env):
    """One eleven-armed structured bandit (a :class:`StructuredBanditVectorEnv` of size 1)."""

    metadata = {"render_modes": []}

    def __init__(self, **kwargs: Any):
        self._vec = StructuredBanditVectorEnv(num_envs=1, **kwargs)
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self._vec_seeded = False

    @staticmethod
    def _unbatch(info: dict[str, Any]) -> dict[str, Any]:
        return {k: v[0].item() for k, v in info.items() if not k.startswith("_")}

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts an episode with a new (or the given) target."""
        super().reset(seed=seed)
        vec_seed = None
        if seed is not None or not self._vec_seeded:  # the vector's generator from ours
            vec_seed = int(self.np_random.integers(2**31))
            self._vec_seeded = True
        obs, info = self._vec.reset(seed=vec_seed, options=options)
        return obs[0], self._unbatch(info)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Pulls arm ``action``."""
        if self._vec.trial[0] >= self._vec.num_trials:
            raise RuntimeError("step() called after the episode terminated; call reset()")
        obs, reward, term, trunc, info = self._vec.step(np.array([int(action)]))
        return obs[0], float(reward[0]), bool(term[0]), bool(trunc[0]), self._unbatch(info)
