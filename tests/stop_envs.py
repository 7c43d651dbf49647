"""Environments for the stop-signal and chaos tests, registered on import so that the command
line can name them (``--env=tests.stop_envs:HangAfter-v0``).

* ``HangAfter-v0``: CartPole whose ``step`` never returns once the process has stepped
  ``TFV_HANG_AFTER`` times (all sub-environments counted together; default 3000): a
  simulator that hangs mid-run.
* ``EvalHang-v0``: CartPole that hangs in a step taken on the main thread (a greedy
  evaluation of an A3C run) after ``TFV_EVALHANG_AFTER`` such steps.
* ``HangSometimes-v0``: CartPole of which each *instance* hangs forever in one ``step`` with
  probability ``TFV_HANG_RATE`` per step (default 0.0002), drawn from a generator of its own
  (not the episode's seed): a simulator that wedges now and then. Only the instance that
  hung stays stuck; a new instance (what replaces a hung actor or worker) steps normally, so
  a run whose acting threads (``--num_actors>=1``, A3C's workers) are replaced after
  ``--env_step_timeout_s`` goes on to its end. Steps taken on the main thread never hang:
  the driver's greedy evaluation (and inline acting) steps there, where a hung call is not
  replaced (inline acting stops the run; a hung evaluation is never timed out), and a chaos
  run must be able to finish.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv

_STEPS = itertools.count()


class HangAfter(CartPoleEnv):
    def step(self, action):
        if next(_STEPS) >= int(os.environ.get("TFV_HANG_AFTER", "3000")):
            while True:  # a simulator stuck in a call that never returns
                time.sleep(3600)
        return super().step(action)


class HangSometimes(CartPoleEnv):
    """CartPole whose instance hangs forever at a random step (module docstring)."""

    def __init__(self, hang_rate: float | None = None, **kwargs):
        super().__init__(**kwargs)
        rate = os.environ.get("TFV_HANG_RATE", "0.0002") if hang_rate is None else hang_rate
        self.hang_rate = float(rate)
        self._draws = np.random.default_rng()

    def step(self, action):
        acting = threading.current_thread() is not threading.main_thread()
        if acting and self._draws.random() < self.hang_rate:
            threading.Event().wait()  # stuck in a call that never returns, this instance only
        return super().step(action)


gym.register("HangAfter-v0", entry_point=HangAfter, max_episode_steps=500)
gym.register("HangSometimes-v0", entry_point=HangSometimes, max_episode_steps=500)


class EvalHang(CartPoleEnv):
    """CartPole whose ``step`` never returns once the main thread has stepped
    ``TFV_EVALHANG_AFTER`` times (default 10): A3C's workers step on threads of their own,
    the run's greedy evaluation on the main thread, so its evaluation hangs."""

    def step(self, action):
        if threading.current_thread() is threading.main_thread():
            if next(_MAIN_STEPS) >= int(os.environ.get("TFV_EVALHANG_AFTER", "10")):
                threading.Event().wait()
        return super().step(action)


_MAIN_STEPS = itertools.count()
gym.register("EvalHang-v0", entry_point=EvalHang, max_episode_steps=500)
