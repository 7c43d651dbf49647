"""Repeatability of a shipped config: N seeds x R repeats, in the default and deterministic modes.

    python benchmarks/repeatability.py --flagfile=experiments/configs/impala_cartpole.cfg
        [--seeds=0,1,2] [--repeats=2] [--modes=default,deterministic] [--threshold=R]
        [--extra_flags="--total_steps=200000"] [--workdir=DIR | --keep] [--bandit_regret]

Every run is ``python -m experiments.train --flagfile=F --seed=S [--deterministic]`` in its
own subprocess (runs of the two modes take turns, so load on the shared machine hits both
alike). Per run: the final greedy return, the step at which ``--stop_return`` was reached
(if the config sets one), the training steps/s, and a fingerprint of its ``metrics.jsonl``
with the timing fields left out (``wall_time``, ``sps``, ``time_*``, ``bottleneck``).

The first line names the machine (``benchmarks/machine.py``). Before each seed's runs the
env-only ceiling is measured (``benchmarks/ceiling.py``, ``--ceiling_steps`` agent steps and
at least a second in a fresh process: the project's vector env of the flagfile's
environments, ``--num_envs`` x ``--num_actors`` after ``--extra_flags``, stepped with random
actions, no network; an ``env_only`` row of the per-run table), and each run's steps/s and
each mode's median are also given as a fraction of it (``of env-only ceiling``; the median
over its measurements for the medians).

Prints one row per run, then per mode and seed the spread across repeats (max - min of the
final return and of the solving step) and whether the repeats' metrics were identical, then
per mode the success rate (final return >= ``--threshold``, default the config's
``--stop_return``), the median steps/s and, with both modes, the throughput cost of
``--deterministic`` (default median steps/s / deterministic median steps/s). The last line
is JSON. Run directories go to ``--workdir`` when given, else to a temporary directory
removed at the end (``--keep`` keeps it).

``--bandit_regret`` (meta-RL bandit flagfiles): every run exports its policy, which
``benchmarks/bandit_regret.py`` scores on the held-out bandits of the flagfile's ``--env``
(cumulative expected regret after 100 pulls, sampled actions) beside Thompson sampling on the
same bandits; a run succeeds when its regret is below Thompson's.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile

from tfagents_vtrace.runtime.rundir.metrics_log import TIMING_FIELDS

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
import ceiling  # noqa: E402
from machine import machine_info, machine_line  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = ("default", "deterministic")
TIMINGS = TIMING_FIELDS


def flagfile_value(path: str, name: str) -> str | None:
    """The last ``--name`` of a flagfile, as text (None if it has none), nested flagfiles
    included (``tfagents_vtrace.utils.flagfiles``, the project's flagfile reader).

    Raises:
      ValueError: a flagfile that cannot be read, or a line that is not a flag.
    """
    from tfagents_vtrace.utils.flagfiles import flag_texts, flagfile_lines

    return flag_texts(flagfile_lines(path)).get(name)


def metrics_fingerprint(logdir: str) -> str:
    """SHA-256 of the run's rows without their timing fields (identical runs share it)."""
    digest = hashlib.sha256()
    with open(os.path.join(logdir, "metrics.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            kept = {k: v for k, v in row.items() if k not in TIMINGS and not k.startswith("time_")}
            digest.update(json.dumps(kept, sort_keys=True).encode())
    return digest.hexdigest()[:16]


def run_one(args, mode: str, seed: int, repeat: int, workdir: str) -> dict:
    logdir = os.path.join(workdir, f"{mode}-seed{seed}-r{repeat}")
    cmd = [sys.executable, "-m", "experiments.train", f"--flagfile={args.flagfile}",
           f"--seed={seed}", f"--logdir={logdir}", f"--export={args.bandit_regret}",
           *(["--deterministic"] if mode == "deterministic" else []),
           *shlex.split(args.extra_flags)]  # fmt: skip
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    final = json.loads(proc.stdout.strip().splitlines()[-1])
    record = {
        "mode": mode, "seed": seed, "repeat": repeat,
        "eval_return": final.get("eval_return"), "solve_step": final.get("solve_step"),
        "step": final["step"], "sps": final.get("train_sps"),
        "fingerprint": metrics_fingerprint(logdir),
    }  # fmt: skip
    if args.bandit_regret:
        record.update(bandit_regret(args.flagfile, os.path.join(logdir, "policy"), env))
    return record


def bandit_regret(flagfile: str, policy: str, env: dict) -> dict:
    """``{"regret": policy's, "thompson": Thompson sampling's}`` on the held-out bandits."""
    env_id = flagfile_value(flagfile, "env")
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "bandit_regret.py"),
           f"--envs={env_id}", "--agents=thompson", "--num_bandits=300", f"--policy={policy}",
           f"--output={os.path.join(os.path.dirname(policy), 'regret.png')}"]  # fmt: skip
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    scores = json.loads(proc.stdout.strip().splitlines()[-1])["regret"]
    policy_key = next(k for k in scores if k.startswith("policy:"))
    return {"regret": scores[policy_key][env_id], "thompson": scores["thompson"][env_id]}


def succeeded(record: dict, threshold: float | None) -> bool:
    """Regret below Thompson's (``--bandit_regret``), else final return >= ``threshold``."""
    if "regret" in record:
        return record["regret"] < record["thompson"]
    return threshold is not None and (record["eval_return"] or -1e30) >= threshold


def summarize(
    records: list[dict], threshold: float | None, ceiling_sps: float | None = None
) -> dict:
    """Per mode: per-seed spreads and identity, success rate, median steps/s and its fraction
    of ``ceiling_sps`` (the median env-only ceiling; None without one); the cost."""
    out: dict = {}
    for mode in MODES:
        mine = [r for r in records if r["mode"] == mode]
        if not mine:
            continue
        seeds = {}
        for seed in sorted({r["seed"] for r in mine}):
            runs = [r for r in mine if r["seed"] == seed]
            returns = [r["eval_return"] for r in runs if r["eval_return"] is not None]
            solves = [r["solve_step"] for r in runs if r["solve_step"] is not None]
            seeds[seed] = {
                "returns": returns,
                "return_spread": max(returns) - min(returns) if returns else None,
                "solve_steps": [r["solve_step"] for r in runs],
                "solve_spread": max(solves) - min(solves) if len(solves) == len(runs) else None,
                "identical": len({r["fingerprint"] for r in runs}) == 1,
            }
        ok = [r for r in mine if succeeded(r, threshold)]
        scored = threshold is not None or "regret" in mine[0]
        out[mode] = {
            "seeds": seeds,
            "success_rate": len(ok) / len(mine) if scored else None,
            "median_sps": statistics.median(r["sps"] for r in mine),
        }
        out[mode]["of_ceiling"] = ceiling.fraction(out[mode]["median_sps"], ceiling_sps)
    if len(out) == 2:
        out["deterministic_cost"] = (
            out["default"]["median_sps"] / out["deterministic"]["median_sps"]
        )
    return out


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--flagfile", required=True)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--threshold", type=float, default=None)
    p.add_argument("--extra_flags", default="")
    p.add_argument("--workdir", default=None)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--bandit_regret", action="store_true")
    p.add_argument(
        "--ceiling_steps",
        type=int,
        default=100_000,
        help="agent steps of the env-only ceiling measured before each seed's runs (0: none)",
    )
    args = p.parse_args(argv)
    if not os.path.isfile(args.flagfile):
        p.exit(2, f"error: --flagfile: no such file {args.flagfile!r}\n")
    try:
        args.seeds = [int(s) for s in args.seeds.split(",") if s]
    except ValueError:
        p.exit(2, f"error: --seeds: expected comma-separated ints, received {args.seeds!r}\n")
    args.modes = [m for m in args.modes.split(",") if m]
    if not args.modes or any(m not in MODES for m in args.modes):
        p.exit(2, f"error: --modes: expected some of {MODES}, received {args.modes}\n")
    if args.repeats < 1 or not args.seeds:
        p.exit(2, "error: --repeats and --seeds: expected at least one\n")
    if args.ceiling_steps < 0:
        p.exit(2, f"error: --ceiling_steps: expected >= 0, received {args.ceiling_steps}\n")
    if args.threshold is None:
        try:
            stop = flagfile_value(args.flagfile, "stop_return")
        except ValueError as e:
            p.exit(2, f"error: --flagfile: {e}\n")
        args.threshold = float(stop) if stop is not None else None
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="repeatability-")
    print(machine_line(), flush=True)
    spec = ceiling.run_envs(args.flagfile, shlex.split(args.extra_flags))
    ceilings = ceiling.Ceilings(args.ceiling_steps)
    print(f"{args.flagfile}: seeds {args.seeds} x {args.repeats} repeats, modes {args.modes}, "
          f"threshold {args.threshold}, runs in {workdir}", flush=True)  # fmt: skip
    print("| mode | seed | repeat | final return | solve step | steps/s | of env-only ceiling "
          "| metrics | regret (Thompson) |\n|---|---|---|---|---|---|---|---|---|",
          flush=True)  # fmt: skip
    records = []
    try:
        for seed in args.seeds:
            # the env-only ceiling of the run's environments, before each seed's runs
            measured = ceilings.measure(spec)
            top = measured["sps"] if measured else None
            if ceilings.steps:
                name = "env_only " + ceiling.label(spec)
                rate = "-" if top is None else f"{top:.0f}"
                print(f"| {name} | {seed} | - | - | - | {rate} | - | - | - |", flush=True)
                if measured is None:
                    print(f"    env-only ceiling: {ceilings.last_error(spec)}", flush=True)
            for repeat in range(args.repeats):
                for mode in args.modes:
                    r = run_one(args, mode, seed, repeat, workdir)
                    r["env_only_sps"] = top
                    r["of_ceiling"] = ceiling.fraction(r["sps"], top)
                    records.append(r)
                    regret = f"{r['regret']} ({r['thompson']})" if "regret" in r else ""
                    of = ceiling.format_fraction(r["of_ceiling"])
                    print(f"| {mode} | {seed} | {repeat} | {r['eval_return']} | "
                          f"{r['solve_step']} | {r['sps']} | {of} | {r['fingerprint']} | "
                          f"{regret} |", flush=True)  # fmt: skip
    finally:
        if not args.workdir and not args.keep:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)
    summary = summarize(records, args.threshold, ceilings.median(spec))
    print("\n| mode | seed | final returns | spread | solve steps | spread | identical |")
    print("|---|---|---|---|---|---|---|")
    for mode in MODES:
        for seed, s in summary.get(mode, {}).get("seeds", {}).items():
            print(f"| {mode} | {seed} | {s['returns']} | {s['return_spread']} | "
                  f"{s['solve_steps']} | {s['solve_spread']} | {s['identical']} |")  # fmt: skip
    for mode in MODES:
        if mode in summary:
            m = summary[mode]
            of, top = ceiling.format_fraction(m["of_ceiling"]), ceilings.median(spec)
            top = "-" if top is None else f"{top:.0f}"
            print(f"{mode}: success rate {m['success_rate']}, median steps/s {m['median_sps']} "
                  f"({of} of the env-only ceiling, median {top})")  # fmt: skip
    if "deterministic_cost" in summary:
        print(f"throughput cost of --deterministic: {summary['deterministic_cost']:.2f}x")
    print(json.dumps({"records": records, "summary": summary, "machine": machine_info(),
                      "ceiling_steps": ceilings.steps,
                      "env_only_ceiling": ceilings.summary()}))  # fmt: skip


if __name__ == "__main__":
    main()
