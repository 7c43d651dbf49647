"""Load an exported policy and play it in your environment, one step at a time.

    python examples/play_policy.py runs/corridor/policy

The policy keeps what a recurrent policy needs between steps (its state, the previous action
and reward, whether an episode starts) in the ``state`` it returns.
"""

import sys

from my_envs import Corridor

import tfagents_vtrace as tv

policy = tv.load_policy(sys.argv[1] if len(sys.argv) > 1 else "runs/corridor/policy")
env = Corridor()
obs, _ = env.reset(seed=0)
action, state = policy.step(obs, greedy=True)  # a new state: the first step of an episode
total, done = 0.0, False
while not done:
    obs, reward, terminated, truncated, _ = env.step(action)
    total += reward
    done = terminated or truncated
    action, state = policy.step(obs, state, reward=reward, greedy=True)
print(f"return {total:.2f}")
