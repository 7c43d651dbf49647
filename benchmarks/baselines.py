"""Classic bandit algorithms, vectorized over many bandit problems, as meta-RL baselines.

The baselines of Wang et al., "Learning to reinforcement learn", 2016,
https://arxiv.org/abs/1611.05763 (Figure 2), run on the same held-out two-armed Bernoulli
bandits as a meta-trained policy:

* ``random``: a uniformly random arm at every pull (expected regret ``|p1 - p2| / 2`` a pull);
* ``greedy``: each arm once, then the arm of highest sample mean (ties broken at random);
* ``ucb1``: each arm once, then ``argmax_a  mean_a + sqrt(2 ln t / n_a)`` (Auer,
  Cesa-Bianchi & Fischer, "Finite-time Analysis of the Multiarmed Bandit Problem", 2002);
* ``thompson``: Beta(1, 1) priors, pull ``argmax_a theta_a`` with
  ``theta_a ~ Beta(1 + successes_a, 1 + failures_a)`` (Thompson, 1933; Chapelle & Li, 2011).

Every agent is a small class over ``N`` problems at once: ``act() -> [N]`` arms and
``update(actions [N], rewards [N])``. :func:`run_agent` plays them on
``TwoArmedBanditVectorEnv`` and returns the per-pull expected regret ``[N, T]``.
"""

from __future__ import annotations

import numpy as np

from tfagents_vtrace.envs import TwoArmedBanditVectorEnv

NUM_ARMS = 2


class BanditAgent:
    """Sample counts ``n [N, K]`` and reward sums ``s [N, K]``, shared by every baseline."""

    def __init__(self, num_problems: int, rng: np.random.Generator, num_arms: int = NUM_ARMS):
        self.rng = rng
        self.n = np.zeros((num_problems, num_arms))
        self.s = np.zeros((num_problems, num_arms))

    def act(self) -> np.ndarray:
        """Arms to pull, ``[N]`` int64."""
        raise NotImplementedError

    def update(self, actions: np.ndarray, rewards: np.ndarray) -> None:
        """Adds the pulls' rewards ``[N]`` to the statistics of the pulled arms ``[N]``."""
        rows = np.arange(self.n.shape[0])
        self.n[rows, actions] += 1.0
        self.s[rows, actions] += rewards

    def _argmax_random_ties(self, scores: np.ndarray) -> np.ndarray:
        """Row-wise argmax of ``scores [N, K]`` with ties broken uniformly at random."""
        noise = self.rng.random(scores.shape)
        best = scores >= scores.max(axis=1, keepdims=True)
        return np.argmax(np.where(best, noise, -1.0), axis=1)

    def _untried_first(self, scores: np.ndarray) -> np.ndarray:
        """Scores with +inf on never-pulled arms (each arm is pulled once first)."""
        return np.where(self.n == 0, np.inf, scores)


class RandomAgent(BanditAgent):
    def act(self) -> np.ndarray:
        return self.rng.integers(0, self.n.shape[1], size=self.n.shape[0])


class GreedyAgent(BanditAgent):
    def act(self) -> np.ndarray:
        mean = self.s / np.maximum(self.n, 1.0)
        return self._argmax_random_ties(self._untried_first(mean))


class UCB1Agent(BanditAgent):
    def act(self) -> np.ndarray:
        t = self.n.sum(axis=1, keepdims=True)
        n = np.maximum(self.n, 1.0)
        index = self.s / n + np.sqrt(2.0 * np.log(np.maximum(t, 1.0)) / n)
        return self._argmax_random_ties(self._untried_first(index))


class ThompsonAgent(BanditAgent):
    def act(self) -> np.ndarray:
        theta = self.rng.beta(1.0 + self.s, 1.0 + self.n - self.s)
        return self._argmax_random_ties(theta)


AGENTS: dict[str, type[BanditAgent]] = {
    "random": RandomAgent,
    "greedy": GreedyAgent,
    "ucb1": UCB1Agent,
    "thompson": ThompsonAgent,
}


def run_agent(name: str, probs: np.ndarray, num_trials: int, seed: int) -> np.ndarray:
    """Plays baseline ``name`` on the bandits ``probs [N, 2]`` for ``num_trials`` pulls.

    The environment's reward draws are seeded with ``seed`` and the agent's own randomness
    with ``seed + 1``. Returns the expected regret of every pull, ``[N, num_trials]``.
    """
    if name not in AGENTS:
        raise ValueError(f"name: expected one of {sorted(AGENTS)}, received {name!r}")
    probs = np.asarray(probs, np.float64)
    n = probs.shape[0]
    env = TwoArmedBanditVectorEnv(n, num_trials=num_trials)
    env.reset(seed=seed, options={"probs": probs})
    agent = AGENTS[name](n, np.random.default_rng(seed + 1))
    regret = np.zeros((n, num_trials))
    for t in range(num_trials):
        actions = agent.act()
        _, rewards, _, _, info = env.step(actions)
        agent.update(actions, rewards)
        regret[:, t] = info["expected_regret"]
    return regret
