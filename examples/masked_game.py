"""A game with an action mask, and IMPALA learning it.

    python examples/masked_game.py --logdir=runs/masked [--total_steps=30000]

Each step a random subset of the 6 actions is allowed; the observation's ``action_mask``
entry says which (PettingZoo's convention: a ``MultiBinary(6)``, 1 where allowed). The reward
is +1 for the best allowed action, the lowest-numbered one, and 0 for any other allowed
action; taking a forbidden action raises. An episode has 10 steps, so the best return is 10,
and picking uniformly among the allowed actions earns ``RANDOM_ALLOWED_RETURN`` (4.01).

The policy never sees the mask as a feature: the network sets the forbidden actions'
logits to -1e9 (probability 0). Learning to prefer action 0, then 1, and so on is enough to
play perfectly, because the masked policy renormalises over what is allowed.

Importing this module registers ``MaskedGame-v0`` (``--env=masked_game:MaskedGame-v0``).
"""

import argparse
from math import comb

import gymnasium as gym
import numpy as np

NUM_ACTIONS = 6
EPISODE_STEPS = 10
# E[1 / |allowed|] over masks of independent fair bits, given one at least, per step.
RANDOM_ALLOWED_RETURN = (
    EPISODE_STEPS
    * sum(comb(NUM_ACTIONS, k) / k for k in range(1, NUM_ACTIONS + 1))
    / (2**NUM_ACTIONS - 1)
)


class MaskedGame(gym.Env):
    """The game of the module docstring. ``MaskedGame.steps`` and ``MaskedGame.masked``
    count, over every instance of the process, the actions taken and the forbidden ones (the
    step raises before counting a forbidden one as taken)."""

    steps = 0
    masked = 0

    def __init__(self):
        self.observation_space = gym.spaces.Dict({
            "clock": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
            "action_mask": gym.spaces.MultiBinary(NUM_ACTIONS),
        })  # fmt: skip
        self.action_space = gym.spaces.Discrete(NUM_ACTIONS)

    def _observe(self):
        mask = np.zeros(NUM_ACTIONS, np.int8)
        while not mask.any():  # at least one allowed action
            mask = self.np_random.integers(0, 2, NUM_ACTIONS).astype(np.int8)
        self.mask = mask
        return {"clock": np.array([self.t / EPISODE_STEPS], np.float32), "action_mask": mask}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._observe(), {}

    def step(self, action):
        action = int(action)
        if not self.mask[action]:
            MaskedGame.masked += 1
            raise ValueError(f"action {action} is masked (allowed: {np.flatnonzero(self.mask)})")
        MaskedGame.steps += 1
        reward = float(action == int(np.argmax(self.mask)))  # the lowest allowed action
        self.t += 1
        return self._observe(), reward, False, self.t >= EPISODE_STEPS, {}


gym.register("MaskedGame-v0", entry_point=MaskedGame)


if __name__ == "__main__":
    import tfagents_vtrace as tv

    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", default="runs/masked")
    parser.add_argument("--total_steps", type=int, default=30_000)
    args = parser.parse_args()
    final = tv.train(
        "impala", env=MaskedGame, logdir=args.logdir, total_steps=args.total_steps, seed=0
    )
    result = tv.evaluate(final["policy"], MaskedGame, episodes=20)
    print(f"greedy return {result['mean_return']:.2f} (random allowed action: "
          f"{RANDOM_ALLOWED_RETURN:.2f}, best: {EPISODE_STEPS}); "
          f"forbidden actions taken: {MaskedGame.masked}")  # fmt: skip
