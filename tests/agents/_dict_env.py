"""Tiny environments with Dict / Tuple observations and MultiDiscrete / MultiBinary actions,
registered as gymnasium ids (the runtime builds networks and vector envs from an id)."""

import gymnasium as gym
import numpy as np

DICT_ENV_ID = "TinyDictMultiDiscrete-v0"
TUPLE_ENV_ID = "TinyTupleMultiBinary-v0"


class TinyDictEnv(gym.Env):
    """A 5x5 uint8 image, a position and a mode; MultiDiscrete([3, 2]) actions. Reward: 1
    for naming the mode with the first action and the sign of ``pos[0]`` with the second;
    a time limit of 6 steps (truncation), and termination when the image's corner is lit."""

    observation_space = gym.spaces.Dict({
        "image": gym.spaces.Box(0, 255, (5, 5, 1), np.uint8),
        "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3),
    })  # fmt: skip
    action_space = gym.spaces.MultiDiscrete([3, 2])

    def _observe(self):
        self._obs = {
            "image": self.np_random.integers(0, 256, (5, 5, 1)).astype(np.uint8),
            "pos": self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32),
            "mode": int(self.np_random.integers(0, 3)),
        }
        return self._obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        obs = self._obs
        reward = float(action[0] == obs["mode"]) + float(action[1] == int(obs["pos"][0] > 0))
        terminated = bool(obs["image"][0, 0, 0] > 250)
        return self._observe(), reward / 2.0, terminated, False, {}


class TinyTupleEnv(gym.Env):
    """A Tuple of a Discrete target and a float vector; MultiBinary(3) actions rewarded for
    matching the target's bits."""

    observation_space = gym.spaces.Tuple(
        (gym.spaces.Discrete(8), gym.spaces.Box(-1.0, 1.0, (2,), np.float32))
    )
    action_space = gym.spaces.MultiBinary(3)

    def _observe(self):
        self._target = int(self.np_random.integers(0, 8))
        return self._target, self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self._observe(), {}

    def step(self, action):
        bits = [(self._target >> i) & 1 for i in range(3)]
        reward = float(np.mean(np.asarray(action) == bits))
        return self._observe(), reward, False, False, {}


def register() -> None:
    """Registers both ids (once per process)."""
    if DICT_ENV_ID not in gym.registry:
        gym.register(DICT_ENV_ID, entry_point=TinyDictEnv, max_episode_steps=6)
    if TUPLE_ENV_ID not in gym.registry:
        gym.register(TUPLE_ENV_ID, entry_point=TinyTupleEnv, max_episode_steps=5)
