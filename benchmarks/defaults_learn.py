"""Do the default settings learn? Trains with no flagfile and no hyperparameter given.

    python benchmarks/defaults_learn.py [--agents=impala,a2c,a3c] [--envs=cartpole,...]
        [--seeds=0,1,2] [--budget=300000] [--jobs=2] [--set=NAME=VALUE ...] [--workdir=DIR]

For every agent, environment and seed a subprocess runs ``tfagents_vtrace.train`` with the
agent's defaults (``--set`` adds settings, for trying candidates) for ``--budget``
environment steps, and the greedy evaluations of its ``metrics.jsonl`` (the default
``eval_every``) are read back. ``total_steps`` is the only setting given: no default depends
on it (no learning-rate or entropy schedule), so the run is the first ``--budget`` steps of a
default run.

Environments: ``cartpole`` (CartPole-v1, target 475) and the four small tasks of
``tests/user_envs.py`` (``corridor``, ``grid_dict``, ``point``, ``pairs``), whose target is
80% of the way from the uniform random policy's return to the scripted policy's. Prints one
row per run (agent, env, seed, steps to the first greedy evaluation >= target, the best
greedy return, the random and the target return, wall seconds) and a last JSON line, after
a first line naming the machine (``benchmarks/machine.py``: CPU model, cores, ISA flags).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
from machine import machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

ENVS = ("cartpole", "corridor", "grid_dict", "point", "pairs")
CARTPOLE_RANDOM, CARTPOLE_TARGET = 22.0, 475.0

_CHILD = """
import sys, json
sys.path.insert(0, {repo!r})
import tfagents_vtrace as tv
env = {env!r}
if env != "CartPole-v1":
    from tests import user_envs
    env = user_envs.ENVS[env]
tv.train({agent!r}, env=env, logdir={logdir!r}, seed={seed}, total_steps={budget},
         overwrite=True, **json.loads({settings!r}))
"""


def targets(env: str) -> tuple[float, float]:
    """``(random return, target return)`` of ``env``."""
    if env == "cartpole":
        return CARTPOLE_RANDOM, CARTPOLE_TARGET
    from tests import user_envs

    cls = user_envs.ENVS[env]
    low, best = user_envs.random_return(cls), user_envs.best_return(cls)
    return low, low + 0.8 * (best - low)


def parse_value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def run_one(agent, env, seed, args, settings, target) -> dict:
    logdir = os.path.join(args.workdir, f"{agent}_{env}_{seed}")
    code = _CHILD.format(
        repo=REPO,
        env="CartPole-v1" if env == "cartpole" else env,
        agent=agent,
        logdir=logdir,
        seed=seed,
        budget=args.budget,
        settings=json.dumps(settings),
    )
    start = time.time()
    cmd = ["nice", "-n", str(args.nice), sys.executable, "-c", code]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    wall = time.time() - start
    row = {"agent": agent, "env": env, "seed": seed, "solve_step": None, "best": None}
    if proc.returncode != 0:
        row["error"] = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
    evals = []
    path = os.path.join(logdir, "metrics.jsonl")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                if r.get("eval_return") is not None:
                    evals.append((r.get("eval_step", r["step"]), r["eval_return"]))
    if evals:
        row["best"] = max(v for _, v in evals)
        row["solve_step"] = next((s for s, v in evals if v >= target), None)
        row["evals"] = len(evals)
    row["wall_s"] = round(wall, 1)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", default="impala,a2c,a3c")
    p.add_argument("--envs", default=None, help="default: cartpole for all, all for impala")
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--budget", type=int, default=300_000)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--nice", type=int, default=5)
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--workdir", default=None)
    args = p.parse_args()
    print(machine_line(), flush=True)
    args.workdir = args.workdir or tempfile.mkdtemp(prefix="defaults_learn_")
    settings = {k: parse_value(v) for k, _, v in (s.partition("=") for s in args.set)}
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = []
    for agent in args.agents.split(","):
        envs = args.envs.split(",") if args.envs else (ENVS if agent == "impala" else ENVS[:1])
        jobs += [(agent, env, seed) for env in envs for seed in seeds]
    refs = {env: targets(env) for env in {j[1] for j in jobs}}
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(run_one, a, e, s, args, settings, refs[e][1]) for a, e, s in jobs]
        rows = []
        header = "agent   env        seed  solve_step  best_greedy  random   target  wall_s"
        print(header, flush=True)
        for fut in futures:
            row = fut.result()
            low, target = refs[row["env"]]
            row.update(random=round(low, 2), target=round(target, 2))
            rows.append(row)
            best = "-" if row["best"] is None else f"{row['best']:.2f}"
            print(
                f"{row['agent']:7} {row['env']:10} {row['seed']:4}  "
                f"{row['solve_step'] or '-':>10}  {best:>11}  {low:6.2f}  {target:7.2f}  "
                f"{row['wall_s']:6.1f}" + (f"  {row['error']}" if "error" in row else ""),
                flush=True,
            )
    print(json.dumps({"settings": settings, "budget": args.budget, "rows": rows}))


if __name__ == "__main__":
    main()
