"""Cumulative expected regret on held-out two-armed bandits: baselines and meta-RL policies.

    python benchmarks/bandit_regret.py [--envs=BanditIndependent-v0,...] [--num_bandits=500]
        [--num_trials=100] [--agents=random,greedy,ucb1,thompson] [--policy=RUN/policy]
        [--output=bandit_regret.png]

Wang et al., "Learning to reinforcement learn", 2016, https://arxiv.org/abs/1611.05763
(section 3.1, Figure 2): a meta-trained LSTM policy is scored by its cumulative expected
regret ``sum_t max(p1, p2) - p_{a_t}`` after ``num_trials`` pulls, averaged over bandits it
never trained on, against UCB1, Thompson sampling, greedy and random play. The held-out
bandits are drawn with ``tfagents_vtrace.envs.EVAL_SEED`` (never a training seed) and every
agent meets the same problems and the same reward generator seed. ``--policy`` evaluates an
exported SavedModel (docs/guide/export.md; it sees the constant observation and is fed
its previous action / reward, ``first`` at the first pull); it samples its actions unless
``--policy_greedy``. Prints the machine (``benchmarks/machine.py``), a markdown table (mean ±
standard error after the last pull) and one JSON line, and writes a PNG of mean cumulative
regret against the trial number.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH = os.path.join(REPO, "benchmarks")
sys.path[:0] = [REPO, _BENCH]
import baselines  # noqa: E402
from machine import machine_line  # noqa: E402

# benchmarks/ leaves sys.path again: on it, benchmarks/minatar.py shadows the minatar package.
sys.path.remove(_BENCH)

from tfagents_vtrace.envs import (  # noqa: E402
    BANDIT_IDS,
    EVAL_SEED,
    TwoArmedBanditVectorEnv,
    held_out_probs,
)


def run_policy(
    policy_path: str, probs: np.ndarray, num_trials: int, seed: int, greedy: bool = False
) -> np.ndarray:
    """Plays an exported SavedModel policy on ``probs [N, 2]``: expected regret ``[N, T]``."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    from tfagents_vtrace.export.playing import load_policy

    tf.random.set_seed(seed)
    n = probs.shape[0]
    policy = load_policy(policy_path)
    state = policy.initial_state(n)
    env = TwoArmedBanditVectorEnv(n, num_trials=num_trials)
    obs, _ = env.reset(seed=seed, options={"probs": probs})
    regret = np.zeros((n, num_trials))
    rewards = None
    for t in range(num_trials):
        actions, state = policy.step(obs, state, reward=rewards, greedy=greedy)
        obs, rewards, _, _, info = env.step(np.asarray(actions, np.int64).reshape(n))
        regret[:, t] = info["expected_regret"]
    return regret


def plot_regret(results: dict, output: str, num_trials: int) -> None:
    """One panel per environment: mean cumulative regret (± s.e.) against the trial."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(results)
    ncols = min(3, len(envs))
    nrows = -(-len(envs) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.5 * ncols, 3.6 * nrows), squeeze=False)
    trials = np.arange(1, num_trials + 1)
    for ax in axes.flat[len(envs) :]:
        ax.set_visible(False)
    for ax, env_id in zip(axes.flat, envs):
        for name, regret in results[env_id].items():
            cum = regret.cumsum(axis=1)
            mean, se = cum.mean(0), cum.std(0) / np.sqrt(cum.shape[0])
            (line,) = ax.plot(trials, mean, label=name)
            ax.fill_between(trials, mean - se, mean + se, color=line.get_color(), alpha=0.2)
        ax.set_title(env_id.removeprefix("Bandit").removesuffix("-v0"))
        ax.set_xlabel("trial")
        ax.grid(alpha=0.3)
    for row in axes:
        row[0].set_ylabel("cumulative expected regret")
    axes.flat[len(envs) - 1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(output, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", default=",".join(BANDIT_IDS))
    parser.add_argument("--agents", default=",".join(baselines.AGENTS))
    parser.add_argument("--num_bandits", type=int, default=500)
    parser.add_argument("--num_trials", type=int, default=100)
    parser.add_argument("--eval_seed", type=int, default=EVAL_SEED)
    parser.add_argument("--policy", action="append", default=[], help="SavedModel (repeatable)")
    parser.add_argument("--policy_greedy", action="store_true")
    parser.add_argument("--output", default="bandit_regret.png")
    args = parser.parse_args()
    env_ids = [e for e in args.envs.split(",") if e]
    for env_id in env_ids:
        if env_id not in BANDIT_IDS:
            parser.error(f"--envs: {env_id!r} is not one of {list(BANDIT_IDS)}")
    print(machine_line(), flush=True)
    start = time.time()
    results: dict[str, dict[str, np.ndarray]] = {}
    for env_id in env_ids:
        probs = held_out_probs(BANDIT_IDS[env_id], args.num_bandits, args.eval_seed)
        seed = args.eval_seed + 1  # reward draws: the same for every agent
        runs = {
            a: baselines.run_agent(a, probs, args.num_trials, seed) for a in args.agents.split(",")
        }
        for path in args.policy:
            name = os.path.basename(os.path.normpath(os.path.dirname(os.path.normpath(path))))
            name = f"policy:{name or path}"
            if name in runs:  # two runs with the same directory name: the whole path
                name = f"policy:{path}"
            runs[name] = run_policy(path, probs, args.num_trials, seed, greedy=args.policy_greedy)
        results[env_id] = runs
    names = list(next(iter(results.values())))
    print(f"Cumulative expected regret after {args.num_trials} pulls, {args.num_bandits} "
          f"held-out bandits (seed {args.eval_seed}); mean ± s.e.\n")  # fmt: skip
    print("| agent | " + " | ".join(e.removesuffix("-v0") for e in env_ids) + " |")
    print("|---|" + "---|" * len(env_ids))
    summary = {}
    for name in names:
        cells = []
        for env_id in env_ids:
            total = results[env_id][name].sum(axis=1)
            mean, se = total.mean(), total.std() / np.sqrt(total.size)
            summary.setdefault(name, {})[env_id] = round(float(mean), 3)
            cells.append(f"{mean:.2f} ± {se:.2f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    plot_regret(results, args.output, args.num_trials)
    print(f"\nwrote {args.output} ({time.time() - start:.1f} s)")
    print(json.dumps({"regret": summary, "num_trials": args.num_trials, "output": args.output}))


if __name__ == "__main__":
    main()
