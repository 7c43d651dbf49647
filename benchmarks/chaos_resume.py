"""Chaos resume: SIGKILL ``experiments.train`` 50+ times per agent, re-run it until it ends.

    python benchmarks/chaos_resume.py [--agents=impala,acer,taac] [--kills=50] [--seed=0]
        [--workdir=/tmp/chaos] [--short]

For each agent (``benchmarks/chaos_lib.py``: ``LONG``, or with ``--short`` the test suite's
``SHORT`` commands) the same ``python -m experiments.train --flagfile=... --logdir=DIR``
command is started, SIGKILLed at a seeded random moment (start-up, setup, training,
checkpoint and replay-archive writes, the last steps and final evaluation, the export) and
started again, ``--kills`` times, then run until it exits 0. IMPALA runs the whole
``impala_cartpole.cfg`` budget and must solve CartPole (greedy ``eval_return >= 475``)
despite the kills. Then every check of ``tests/runtime/test_chaos.py`` runs on the run
directory (exit code, strict ``final.json`` at the requested step, strict ``metrics.jsonl``
with steps strictly increasing and counters never going backwards, no temporary files, the
exported policy loads with plain TensorFlow and acts, no traceback from any start).

Prints the machine (``benchmarks/machine.py``), one line per start, then a table: agent,
kills, re-runs, final step, final eval_return, wall time, where the kills landed, and every
failed check; notes list what the checks do not fail on (checkpoints moved to ``damaged/``,
warnings, how many checkpoints and replay archives the directory holds). The last line is
JSON. Exit code 1 when a check failed. Run directories and each start's stdout/stderr stay
in ``--workdir/<agent>/``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # policy_acts imports TensorFlow here

import chaos_lib  # noqa: E402
from machine import machine_line  # noqa: E402


def _notes(campaign: chaos_lib.Campaign) -> list[str]:
    """What the checks allow but a reader should see."""
    logdir, notes = campaign.logdir, []
    damaged = os.path.join(logdir, "checkpoints", "damaged")
    if os.path.isdir(damaged):
        notes.append(f"checkpoints/damaged/: {sorted(os.listdir(damaged))}")
    warnings = sorted(
        {line for a in campaign.attempts for line in a.stderr.splitlines()
         if line.startswith("warning:")}
    )  # fmt: skip
    notes += [f"start warning: {line[:300]}" for line in warnings]
    return notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", default="impala,acer,taac")
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", default="/tmp/chaos")
    parser.add_argument("--short", action="store_true", help="the test suite's commands")
    args = parser.parse_args()
    cases = chaos_lib.SHORT if args.short else chaos_lib.LONG
    agents = [a for a in args.agents.split(",") if a]
    unknown = [a for a in agents if a not in cases]
    if unknown or args.kills < 0:
        parser.error(f"--agents: choose from {sorted(cases)}" if unknown else "--kills: >= 0")
    print(machine_line(), flush=True)
    results = []
    for agent in agents:
        case, root = cases[agent], os.path.join(args.workdir, agent)
        shutil.rmtree(root, ignore_errors=True)
        print(f"== {agent}: {' '.join(case.command(os.path.join(root, 'run')))}", flush=True)

        def log(a: chaos_lib.Attempt, agent=agent) -> None:
            what = (
                f"killed at {a.kill_at:.2f} s in {a.phase}" if a.killed else f"exit {a.returncode}"
            )
            print(f"  {agent} start {a.index:3d} plan={a.plan or '-':10s} {what} "
                  f"({a.seconds:.1f} s)", flush=True)  # fmt: skip

        campaign = chaos_lib.run_campaign(
            case, os.path.join(root, "run"), args.kills, args.seed, os.path.join(root, "logs"),
            log=log,
        )  # fmt: skip
        failures = chaos_lib.check_campaign(campaign)
        if campaign.last.returncode == 0:
            problem = chaos_lib.policy_acts(os.path.join(root, "run", "policy"), case.env_id)
            failures += [f"policy: {problem}"] if problem else []
        final = chaos_lib.last_json_line(campaign.last.stdout) or {}
        results.append(
            dict(
                agent=agent, kills=campaign.kills, reruns=len(campaign.attempts) - 1,
                final_step=final.get("step"), eval_return=final.get("eval_return"),
                solve_step=final.get("solve_step"), wall_s=campaign.seconds,
                phases=campaign.phases(), failures=failures, notes=_notes(campaign),
            )
        )  # fmt: skip
    print()
    header = f"{'agent':7s} {'kills':>5s} {'re-runs':>7s} {'final step':>10s} "
    header += f"{'eval_return':>11s} {'wall s':>7s}  kills landed in"
    print(header)
    for r in results:
        ret = "-" if r["eval_return"] is None else f"{r['eval_return']:.1f}"
        phases = ", ".join(f"{k} {v}" for k, v in sorted(r["phases"].items()))
        print(f"{r['agent']:7s} {r['kills']:5d} {r['reruns']:7d} {str(r['final_step']):>10s} "
              f"{ret:>11s} {r['wall_s']:7.0f}  {phases}")  # fmt: skip
    for r in results:
        print(f"\n{r['agent']}: {'FAILED CHECKS' if r['failures'] else 'all checks passed'}")
        for failure in r["failures"]:
            print("  FAIL " + failure.replace("\n", "\n       "))
        for note in r["notes"]:
            print("  note " + note)
    print(json.dumps({"time": time.strftime("%Y-%m-%d %H:%M:%S"), "seed": args.seed,
                      "results": results}))  # fmt: skip
    return 1 if any(r["failures"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
