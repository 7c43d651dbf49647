"""Train IMPALA on your own environment from Python, then play the exported policy.

    python examples/train_from_python.py --logdir=runs/corridor [--total_steps=100000]

Running it again resumes the run (or reports that it already ended).
"""

import argparse

from my_envs import Corridor

import tfagents_vtrace as tv

parser = argparse.ArgumentParser()
parser.add_argument("--logdir", default="runs/corridor")
parser.add_argument("--total_steps", type=int, default=100_000)
args = parser.parse_args()

final = tv.train("impala", env=Corridor, logdir=args.logdir, total_steps=args.total_steps, seed=0)
print("greedy return at the end:", final["eval_return"])

policy = tv.load_policy(final["policy"])
print(tv.evaluate(policy, Corridor, episodes=10)["mean_return"])
