"""Two-armed Bernoulli bandit episodes for meta-reinforcement learning.

Wang et al., "Learning to reinforcement learn", 2016, https://arxiv.org/abs/1611.05763
(section 3.1): an episode is one bandit problem of ``num_trials`` pulls (100 by default); the
arm probabilities ``(p1, p2)`` are drawn afresh at every reset, so a recurrent policy that
sees its previous action, previous reward and the time step (Duan et al., "RL^2", 2016,
https://arxiv.org/abs/1611.02779) has to learn an exploration strategy. Task families:

* ``independent``:        ``p1, p2 ~ U[0, 1]`` independently;
* ``dependent_uniform``:  ``p1 ~ U[0, 1]``, ``p2 = 1 - p1``;
* ``dependent_easy``:     ``p1 ~ U{0.1, 0.9}``, ``p2 = 1 - p1``;
* ``dependent_medium``:   ``p1 ~ U{0.25, 0.75}``, ``p2 = 1 - p1``;
* ``dependent_hard``:     ``p1 ~ U{0.4, 0.6}``, ``p2 = 1 - p1``.

Pulling arm ``a`` pays ``r ~ Bernoulli(p_a)``. The observation carries nothing (a constant
``zeros(1)`` float32). ``info`` reports the expected regret of the pull,
``max(p1, p2) - p_a``, and its running sum ``cumulative_regret`` (the regret of Lai & Robbins
and of Wang et al.'s figures); ``reset(options={"probs": [p1, p2]})`` fixes the arms of the
episode it starts (held-out evaluation). An episode *terminates* after ``num_trials`` pulls.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import Env, spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

TASKS: tuple[str, ...] = (
    "independent",
    "dependent_uniform",
    "dependent_easy",
    "dependent_medium",
    "dependent_hard",
)
# The support of p1 for the dependent tasks with a discrete set of problems.
PROB_SETS: dict[str, tuple[float, float]] = {
    "dependent_easy": (0.1, 0.9),
    "dependent_medium": (0.25, 0.75),
    "dependent_hard": (0.4, 0.6),
}


def sample_probs(task: str, rng: np.random.Generator, n: int) -> np.ndarray:
    """Draws ``n`` two-armed bandit problems of family ``task``: returns ``[n, 2]`` float64."""
    if task not in TASKS:
        raise ValueError(f"task: expected one of {TASKS}, received {task!r}")
    if task == "independent":
        return rng.uniform(size=(n, 2))
    if task == "dependent_uniform":
        p1 = rng.uniform(size=n)
    else:
        p1 = rng.choice(np.asarray(PROB_SETS[task]), size=n)
    return np.stack([p1, 1.0 - p1], axis=-1)


# Seed of the held-out evaluation bandits (benchmarks/bandit_regret.py). Never train with it:
# training draws its problems from the environments' generators seeded by the run's --seed.
EVAL_SEED = 20_161_117


def held_out_probs(task: str, num_bandits: int = 500, seed: int = EVAL_SEED) -> np.ndarray:
    """The fixed evaluation problems of family ``task``: ``[num_bandits, 2]`` float64."""
    return sample_probs(task, np.random.default_rng(seed), num_bandits)


def _check_probs(probs: Any, batch: int | None) -> np.ndarray:
    """Validates ``options["probs"]``: ``[2]`` (or ``[batch, 2]``) in [0, 1]; returns float64."""
    p = np.asarray(probs, dtype=np.float64)
    expected = "[2]" if batch is None else f"[2] or [{batch}, 2]"
    ok = p.shape == (2,) or (batch is not None and p.shape == (batch, 2))
    if not ok:
        raise ValueError(f"options['probs']: expected shape {expected}, received {p.shape}")
    if np.any(p < 0.0) or np.any(p > 1.0):
        raise ValueError(f"options['probs']: expected values in [0, 1], received {p.tolist()}")
    return p


def _check_common(task: str, num_trials: int) -> None:
    if task not in TASKS:
        raise ValueError(f"task: expected one of {TASKS}, received {task!r}")
    if isinstance(num_trials, bool) or not isinstance(num_trials, int) or num_trials < 1:
        raise ValueError(f"num_trials: expected a positive int, received {num_trials!r}")


_OBS_SPACE = spaces.Box(low=0.0, high=1.0, shape=(1,), dtype=np.float32)


class TwoArmedBanditEnv(Env):
    """One two-armed Bernoulli bandit per episode (see the module docstring).

    Observation ``zeros([1])`` float32; action ``Discrete(2)``; reward 0 or 1; terminated
    after ``num_trials`` pulls. ``info``: ``expected_regret``, ``cumulative_regret``,
    ``trial`` (pulls so far) and ``probs`` (``[2]``).
    """

    metadata = {"render_modes": []}

    def __init__(self, task: str = "independent", num_trials: int = 100):
        _check_common(task, num_trials)
        self.task = task
        self.num_trials = num_trials
        self.observation_space = _OBS_SPACE
        self.action_space = spaces.Discrete(2)
        self.probs = np.full(2, 0.5)
        self._trial = 0
        self._cumulative = 0.0

    def _info(self, expected_regret: float) -> dict[str, Any]:
        return {
            "expected_regret": expected_regret,
            "cumulative_regret": self._cumulative,
            "trial": self._trial,
            "probs": self.probs.copy(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts an episode: arms from ``options["probs"]`` or drawn from ``task``."""
        super().reset(seed=seed)
        if options is not None and "probs" in options:
            self.probs = _check_probs(options["probs"], None)
        else:
            self.probs = sample_probs(self.task, self.np_random, 1)[0]
        self._trial = 0
        self._cumulative = 0.0
        return np.zeros(1, np.float32), self._info(0.0)

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """Pulls arm ``action``; reward ~ Bernoulli(probs[action])."""
        if self._trial >= self.num_trials:
            raise RuntimeError("step() called after the episode terminated; call reset()")
        a = int(action)
        if a not in (0, 1):
            raise ValueError(f"action: expected 0 or 1, received {action!r}")
        reward = float(self.np_random.random() < self.probs[a])
        regret = float(self.probs.max() - self.probs[a])
        self._trial += 1
        self._cumulative += regret
        terminated = self._trial >= self.num_trials
        return np.zeros(1, np.float32), reward, terminated, False, self._info(regret)


class BanditVectorEnv(VectorEnv):
    """``num_envs`` bandit episodes of ``num_trials`` pulls stepped together with numpy,
    NEXT_STEP autoreset: the bookkeeping the two-armed and the structured bandit share.

    Each sub-environment hides a problem, the row of the ``[B, ...]`` attribute named by the
    subclass's ``PROBLEM``, drawn at the start of each of its episodes by :meth:`_draw`
    (``reset(options={PROBLEM: value})`` fixes the problems it starts, :meth:`_given`).
    Observations ``[B, 1]`` zeros; ``info`` arrays ``[B]``: ``expected_regret``,
    ``cumulative_regret``, ``trial`` and the problems (masks ``_<key>`` all True). At a reset
    step (the step after an episode ended) the sub-environment ignores its action, draws a new
    problem and reports reward 0, regrets 0, trial 0.
    """

    metadata = {"render_modes": [], "autoreset_mode": AutoresetMode.NEXT_STEP}
    PROBLEM = ""

    def __init__(self, num_envs: int, num_trials: int, num_arms: int, problems: np.ndarray):
        self.num_envs = num_envs
        self.num_trials = num_trials
        self.single_observation_space = spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.single_action_space = spaces.Discrete(num_arms)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        setattr(self, self.PROBLEM, problems)
        self.trial = np.zeros(num_envs, np.int64)
        self.cumulative = np.zeros(num_envs, np.float64)
        self.prev_done = np.zeros(num_envs, bool)

    def _draw(self, n: int) -> np.ndarray:
        """``n`` new problems from the environments' generator."""
        raise NotImplementedError

    def _given(self, value: Any) -> np.ndarray:
        """The ``[B, ...]`` problems of ``options[PROBLEM]``, validated."""
        raise NotImplementedError

    def _pull(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Validates the values of ``actions [B]``; returns ``(reward [B] float32,
        expected regret [B] float64)``."""
        raise NotImplementedError

    def _info(self, expected_regret: np.ndarray) -> dict[str, Any]:
        info = {
            "expected_regret": expected_regret,
            "cumulative_regret": self.cumulative.copy(),
            "trial": self.trial.copy(),
            self.PROBLEM: getattr(self, self.PROBLEM).copy(),
        }
        ones = np.ones(self.num_envs, bool)
        info.update({"_" + k: ones for k in list(info)})
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Starts a new episode in every sub-environment."""
        super().reset(seed=seed)
        if options is not None and self.PROBLEM in options:
            setattr(self, self.PROBLEM, self._given(options[self.PROBLEM]))
        else:
            setattr(self, self.PROBLEM, self._draw(self.num_envs))
        self.trial[:] = 0
        self.cumulative[:] = 0.0
        self.prev_done[:] = False
        return np.zeros((self.num_envs, 1), np.float32), self._info(np.zeros(self.num_envs))

    def step(
        self, actions: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Pulls ``actions [B]`` in every sub-environment."""
        a = np.asarray(actions)
        if a.shape != (self.num_envs,):
            raise ValueError(f"actions: expected shape ({self.num_envs},), received {a.shape}")
        reward, regret = self._pull(a)
        self.trial += 1
        self.cumulative += regret
        terminated = self.trial >= self.num_trials
        reset = self.prev_done  # these sub-envs start a new episode instead
        if reset.any():
            getattr(self, self.PROBLEM)[reset] = self._draw(int(reset.sum()))
            self.trial[reset] = 0
            self.cumulative[reset] = 0.0
            reward[reset] = 0.0
            regret[reset] = 0.0
            terminated[reset] = False
        self.prev_done = terminated.copy()
        obs = np.zeros((self.num_envs, 1), np.float32)
        return obs, reward, terminated, np.zeros(self.num_envs, bool), self._info(regret)


class TwoArmedBanditVectorEnv(BanditVectorEnv):
    """``num_envs`` two-armed bandits (:class:`BanditVectorEnv`), problems ``probs``
    ``[B, 2]``: ``reset(options={"probs": p})`` with ``p`` of shape ``[2]`` or ``[B, 2]``
    fixes the arms of the episodes it starts; episodes started by autoreset draw new arms
    from ``task``.
    """

    PROBLEM = "probs"

    def __init__(self, num_envs: int = 1, task: str = "independent", num_trials: int = 100):
        _check_common(task, num_trials)
        self.task = task
        super().__init__(num_envs, num_trials, 2, np.full((num_envs, 2), 0.5))

    def _draw(self, n: int) -> np.ndarray:
        return sample_probs(self.task, self.np_random, n)

    def _given(self, value: Any) -> np.ndarray:
        p = _check_probs(value, self.num_envs)
        return np.broadcast_to(p, (self.num_envs, 2)).copy()

    def _pull(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Arms in {0, 1}; reward ~ Bernoulli(probs[arm])."""
        if not np.all((a == 0) | (a == 1)):
            raise ValueError(f"actions: expected values in {{0, 1}}, received {a.tolist()}")
        p_a = self.probs[np.arange(self.num_envs), a.astype(np.int64)]
        reward = (self.np_random.random(self.num_envs) < p_a).astype(np.float32)
        return reward, self.probs.max(axis=1) - p_a
