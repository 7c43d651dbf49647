"""TAAC, TaacL and TaacQ against Stable-Baselines3 SAC at the same environment-step budget.

Yu et al., "TAAC: Temporally Abstract Actor-Critic for Continuous Control", 2021,
https://arxiv.org/abs/2104.06521; SAC: Haarnoja et al. 2018, https://arxiv.org/abs/1801.01290.

    python benchmarks/taac_pendulum.py [--env=Pendulum-v1] [--steps=20000] [--seeds=0,1,2]
        [--systems=taac,taacl,taacq,sac] [--eval_every=2000] [--eval_episodes=10]
        [--plot=taac_pendulum.png] [--workdir=/tmp/taac_bench]

Every run is a subprocess, run one after another (seed-major, systems interleaved so machine
load drifts hit every system alike). Ours: ``experiments.train`` with
``experiments/configs/{taac,taacl,taacq}_pendulum.cfg`` (``taac_mountaincar.cfg`` for
``--env=MountainCarContinuous-v0``, TAAC only). SAC: SB3 defaults (256x256, batch 256,
automatic entropy, one update per step) with ``--sac_lr`` (RL-Zoo's 1e-3 for Pendulum), on
CPU with ``--torch_threads`` threads. Both evaluate on separate environments every
``--eval_every`` steps and at the end: TAAC epsilon-greedy (its config's
``epsilon_greedy``), SAC deterministic. Prints the machine (``benchmarks/machine.py``), one
row per run and the medians over seeds: final evaluation return, wall time, and TAAC's mean
repeat length (environment steps per trajectory started, over the training rollouts after
the random phase, and over the final evaluation).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

START_TIME = time.time()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
from machine import machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package
CONFIGS = {
    ("taac", "Pendulum-v1"): "taac_pendulum.cfg",
    ("taacl", "Pendulum-v1"): "taacl_pendulum.cfg",
    ("taacq", "Pendulum-v1"): "taacq_pendulum.cfg",
    ("taac", "MountainCarContinuous-v0"): "taac_mountaincar.cfg",
}


def sac_worker(args: argparse.Namespace) -> None:
    """Trains SB3 SAC in this process; writes LOGDIR/metrics.jsonl and prints a JSON line."""
    import numpy as np
    import torch
    from stable_baselines3 import SAC
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy

    torch.set_num_threads(args.torch_threads)
    os.makedirs(args.logdir, exist_ok=True)
    metrics = open(os.path.join(args.logdir, "metrics.jsonl"), "w")  # noqa: SIM115
    eval_env = make_vec_env(args.env, n_envs=1, seed=args.seed + 10_000)

    class Eval(BaseCallback):
        def __init__(self):
            super().__init__()
            self.next_eval = args.eval_every

        def evaluate(self) -> float:
            mean, _ = evaluate_policy(
                self.model, eval_env, n_eval_episodes=args.eval_episodes, deterministic=True
            )
            rets = [e["r"] for e in self.model.ep_info_buffer]
            row = {
                "step": int(self.num_timesteps),
                "wall_time": time.time() - START_TIME,
                "eval_return": float(mean),
                "episode_return": float(np.mean(rets)) if rets else None,
            }
            metrics.write(json.dumps(row) + "\n")
            metrics.flush()
            return float(mean)

        def _on_step(self) -> bool:
            if self.num_timesteps >= self.next_eval:
                self.next_eval += args.eval_every
                self.evaluate()
            return True

    env = make_vec_env(args.env, n_envs=1, seed=args.seed)
    model = SAC(
        "MlpPolicy", env, learning_rate=args.sac_lr, seed=args.seed, device="cpu", verbose=0
    )
    callback = Eval()
    model.learn(total_timesteps=args.steps, callback=callback)
    final = callback.evaluate() if callback.next_eval - args.eval_every < args.steps else None
    rows = [json.loads(line) for line in open(os.path.join(args.logdir, "metrics.jsonl"))]
    metrics.close()
    final = rows[-1]["eval_return"] if final is None else final
    print(json.dumps({"final": True, "step": int(model.num_timesteps), "eval_return": final}))


def _last_json(stdout: str) -> dict:
    from tfagents_vtrace.runtime.rundir.config_io import last_json_line

    return last_json_line(stdout)


def _rows(logdir: str) -> list[dict]:
    from tfagents_vtrace.runtime.rundir.metrics_log import read_metrics

    return read_metrics(logdir)


def run_one(system: str, seed: int, args: argparse.Namespace) -> dict:
    """One run in a subprocess; returns its record (final return, wall, repeat lengths)."""
    logdir = os.path.join(args.workdir, f"{system}_{args.env}_s{seed}")
    if system == "sac":
        cmd = [sys.executable, os.path.abspath(__file__), "--sac_worker", f"--seed={seed}"]
        cmd += [f"--env={args.env}", f"--steps={args.steps}", f"--logdir={logdir}"]
        cmd += [f"--eval_every={args.eval_every}", f"--eval_episodes={args.eval_episodes}"]
        cmd += [f"--sac_lr={args.sac_lr}", f"--torch_threads={args.torch_threads}"]
    else:
        config = os.path.join("experiments", "configs", CONFIGS[(system, args.env)])
        cmd = [sys.executable, "-m", "experiments.train", f"--flagfile={config}"]
        cmd += [f"--logdir={logdir}", f"--seed={seed}", f"--total_steps={args.steps}"]
        cmd += [f"--eval_every={args.eval_every}", f"--eval_episodes={args.eval_episodes}"]
        cmd += ["--export=false", "--log_every_s=30"]
    if os.path.exists(logdir):
        import shutil

        shutil.rmtree(logdir)
    t0 = time.time()
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        capture_output=True,
        text=True,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    wall = time.time() - t0
    final, rows = _last_json(proc.stdout), _rows(logdir)
    rollout_rl = [r["repeat_length"] for r in rows if r.get("repeat_length")]
    record = {
        "system": system,
        "seed": seed,
        "rc": proc.returncode,
        "final_return": final.get("eval_return"),
        "wall": wall,
        "repeat_length": statistics.mean(rollout_rl) if rollout_rl else None,
        "eval_repeat_length": final.get("eval_repeat_length"),
        "curve": [(r["step"], r["eval_return"]) for r in rows if "eval_return" in r],
    }
    if proc.returncode != 0:
        record["error"] = proc.stderr.strip().splitlines()[-3:]
    return record


def _fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def _median(records: list[dict], key: str):
    values = [r[key] for r in records if r.get(key) is not None]
    return statistics.median(values) if values else None


def plot(records: list[dict], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, system in enumerate(dict.fromkeys(r["system"] for r in records)):
        color = f"C{i}"
        curves = [r["curve"] for r in records if r["system"] == system and r["curve"]]
        for curve in curves:
            ax.plot(*zip(*curve, strict=True), color=color, alpha=0.3, lw=1)
        steps = sorted({s for c in curves for s, _ in c})
        med = [statistics.median([v for c in curves for s2, v in c if s2 == s]) for s in steps]
        ax.plot(steps, med, color=color, lw=2, label=f"{system} (median)")
    ax.set_xlabel("environment steps")
    ax.set_ylabel("evaluation return")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--env", default="Pendulum-v1")
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--systems", default="taac,taacl,taacq,sac")
    p.add_argument("--eval_every", type=int, default=2000)
    p.add_argument("--eval_episodes", type=int, default=10)
    p.add_argument("--sac_lr", type=float, default=1e-3)
    p.add_argument("--torch_threads", type=int, default=1)
    p.add_argument("--plot", default="taac_pendulum.png")
    p.add_argument("--workdir", default="/tmp/taac_bench")
    p.add_argument("--json", default=None, help="also write all records to this file")
    p.add_argument("--sac_worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--logdir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.sac_worker:
        return sac_worker(args)
    systems, seeds = args.systems.split(","), [int(s) for s in args.seeds.split(",")]
    records = []
    print(machine_line(), flush=True)
    print("| system | seed | final eval return | wall s | repeat len (rollout / eval) |")
    print("|---|---|---|---|---|", flush=True)
    for seed in seeds:
        for system in systems:
            rec = run_one(system, seed, args)
            records.append(rec)
            rl = f"{_fmt(rec['repeat_length'], '.2f')} / {_fmt(rec['eval_repeat_length'], '.2f')}"
            err = f" ERROR {rec['error']}" if rec.get("error") else ""
            ret = _fmt(rec["final_return"])
            print(f"| {system} | {seed} | {ret} | {rec['wall']:.0f} | {rl} |{err}", flush=True)
    print(f"\nMedians over seeds {seeds} ({args.env}, {args.steps} env steps):")
    print("| system | median final return | median wall s | median repeat len (rollout / eval) |")
    print("|---|---|---|---|")
    for system in systems:
        recs = [r for r in records if r["system"] == system]
        rl = f"{_fmt(_median(recs, 'repeat_length'), '.2f')} / "
        rl += _fmt(_median(recs, "eval_repeat_length"), ".2f")
        print(
            f"| {system} | {_fmt(_median(recs, 'final_return'))} | "
            f"{_fmt(_median(recs, 'wall'), '.0f')} | {rl} |"
        )
    if args.plot:
        plot(records, args.plot, f"{args.env}, {args.steps} steps, seeds {seeds}")
        print(f"\nplot: {args.plot}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)


if __name__ == "__main__":
    main()
