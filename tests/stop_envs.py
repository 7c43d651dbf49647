"""Environments for the stop-signal tests, registered on import so that the command line can
name them (``--env=tests.stop_envs:HangAfter-v0``).

* ``HangAfter-v0``: CartPole whose ``step`` never returns once the process has stepped
  ``TFV_HANG_AFTER`` times (all sub-environments counted together; default 3000): a
  simulator that hangs mid-run.
"""

from __future__ import annotations

import itertools
import os
import time

import gymnasium as gym
from gymnasium.envs.classic_control import CartPoleEnv

_STEPS = itertools.count()


class HangAfter(CartPoleEnv):
    def step(self, action):
        if next(_STEPS) >= int(os.environ.get("TFV_HANG_AFTER", "3000")):
            while True:  # a simulator stuck in a call that never returns
                time.sleep(3600)
        return super().step(action)


gym.register("HangAfter-v0", entry_point=HangAfter, max_episode_steps=500)
