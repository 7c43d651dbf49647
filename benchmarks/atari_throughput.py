"""Atari training throughput: our IMPALA (Nature CNN) against SB3 A2C ``CnnPolicy``.

    python benchmarks/atari_throughput.py [--env=ALE/Pong-v5] [--steps=60000] [--rounds=2]
        [--torch_threads=1,2] [--systems=ours,resnet_lstm,resnet_lstm_xla_f32,sb3_a2c]
        [--num_envs=8] [--baseline_tree=DIR --baseline_flagfile=PATH]

Agent steps per second of training (each agent step is 4 frames), both sides on
``--num_envs`` environments in all (ours: split evenly over the flagfile's actor threads)
with the same preprocessing (84x84 grey, 4 stacked frames,
frame skip 4), measured over ``--steps`` environment steps after start-up
(``--resnet_steps`` for the ResNet + LSTM config, ~10x slower on a CPU). The systems take
turns round by round (ours, the ResNet + LSTM config, SB3 with each torch thread count), so
load on the shared 2-core machine hits all alike; medians over rounds and the ratios of ours
to SB3 at its best thread count are printed in one table, the last line is JSON.

* ``ours``: ``python -m experiments.train
  --flagfile=experiments/configs/impala_atari_pong_nature_cnn.cfg --num_envs=N`` (the
  paper's one-SGD-step IMPALA on the Nature CNN; its actors and unroll length), read from
  the final JSON line's ``train_sps`` (steps / seconds of the training loop: no imports, no
  final evaluation).
* ``pong``: the same with ``impala_atari_pong.cfg`` (the small CNN with sample reuse, the
  config that solves Pong on a CPU; it ships 16 environments: give ``--num_envs=16``).
* ``resnet_lstm``: the same with ``impala_atari_pong_resnet_lstm_gpu.cfg``;
  ``resnet_lstm_xla_f32`` adds ``--jit_compile --cnn_compute_dtype=float32``, the settings
  that file had until 2026-11-26 (XLA, float32; about 90 steps/s then): the reference its
  ratio is printed against (XLA's CPU convolutions are not oneDNN's).
* ``baseline`` (with ``--baseline_tree=DIR``): ``--baseline_flagfile`` run by DIR's own
  ``experiments.train`` (cwd DIR, so DIR's ``tfagents_vtrace`` is the one imported), for
  ``--resnet_steps``: the code and config of an older commit measured in the same run, e.g.
  ``git worktree add /tmp/old f8a314b`` (the ResNet + LSTM Pong config when issue 13 quoted
  its ~90 steps/s: ``experiments/configs/impala_atari_pong.cfg`` there). ResNet + LSTM rows
  print their ratio to it too.
* ``pong_groups1`` / ``pong_groups2``: ``pong`` with its environments stepped as one vector
  or as two groups that take turns (``--env_groups``).
* ``ours_f32`` / ``ours_bf16`` and ``pong_f32`` / ``pong_bf16``: ``ours`` and ``pong`` with
  ``--cnn_compute_dtype`` forced to float32 / bfloat16 instead of the files' ``auto``, to
  check the choice ``auto`` makes on this CPU against both.
* ``sb3_a2c``: Stable-Baselines3 ``A2C("CnnPolicy")`` with its Atari defaults
  (``make_atari_env`` + ``VecFrameStack(4)``, n_steps 5, RMSProp) on CPU with
  ``torch.set_num_threads(k)``; steps / seconds of ``model.learn`` (bench extra).

Every round also measures, for each of our systems (not ``baseline``), the CPU time per agent
step of each stage alone (``benchmarks/stage_costs.py`` in a fresh process with the system's
flags: the environments, the actor's forward pass, the learner's update), and reads the
training run's own CPU per step and its throughput in its steady state (the metrics rows
after the first quarter of its steps, so start-up and the update's tracing are left out): a
second table prints the stages, the rest (the run's CPU minus the three), the cap that the
stages set on this machine's cores (``cores / (env + inference + learner)`` agent steps/s)
and the steady throughput as a fraction of it; ``--stage_seconds=0`` skips it.

Every round also measures the env-only ceiling (``benchmarks/ceiling.py`` in a fresh process:
the project's vector env of ``--num_envs`` Pong environments, as the configs make them, stepped
with random actions for ``--ceiling_steps``, no network): the table states each system's
throughput as a fraction of it. The
first line names the machine (CPU model, cores, avx2 / avx512f / avx512_bf16 / amx_bf16, what
``--cnn_compute_dtype=auto`` resolves to: ``benchmarks/machine.py``).

Both need the ``atari`` extra (ale-py, opencv); SB3 needs the ``bench`` extra. A missing
package stops the script with one line on stderr and exit code 2.
"""

import time

START_TIME = time.time()

import argparse  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

_BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _BENCH)
from ceiling import format_fraction, fraction, measure_subprocess  # noqa: E402
from machine import machine_info, machine_line  # noqa: E402
from stage_costs import STAGES, cap_row  # noqa: E402
from stage_costs import measure_subprocess as measure_stages  # noqa: E402

sys.path.remove(_BENCH)  # benchmarks/minatar.py would shadow the minatar package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = {  # system: (flagfile, extra flags)
    "ours": ("impala_atari_pong_nature_cnn.cfg", ()),
    "pong": ("impala_atari_pong.cfg", ()),
    "resnet_lstm": ("impala_atari_pong_resnet_lstm_gpu.cfg", ()),
    "pong_groups1": ("impala_atari_pong.cfg", ("--env_groups=1",)),
    "pong_groups2": ("impala_atari_pong.cfg", ("--env_groups=2",)),
    "resnet_lstm_xla_f32": (
        "impala_atari_pong_resnet_lstm_gpu.cfg",
        ("--jit_compile", "--cnn_compute_dtype=float32"),
    ),
}
CONFIGS.update(
    {  # the shipped files, which ask for auto, with the dtype forced
        f"{name}_{suffix}": (CONFIGS[name][0], (f"--cnn_compute_dtype={dtype}",))
        for name in ("ours", "pong")
        for suffix, dtype in (("f32", "float32"), ("bf16", "bfloat16"))
    }
)
RESNET = ("resnet_lstm", "resnet_lstm_xla_f32", "baseline")
NEEDS = {"ours": ("ale_py", "cv2"), "pong": ("ale_py", "cv2"), "resnet_lstm": ("ale_py", "cv2"),
         "resnet_lstm_xla_f32": ("ale_py", "cv2"), "baseline": ("ale_py", "cv2"),
         "sb3_a2c": ("ale_py", "cv2", "torch", "stable_baselines3")}  # fmt: skip
NEEDS.update({name: ("ale_py", "cv2") for name in CONFIGS if name not in NEEDS})


def sb3_worker(args: argparse.Namespace) -> None:
    """Trains SB3 A2C for ``--steps`` in this process; prints one JSON line."""
    import ale_py
    import gymnasium as gym
    import torch
    from stable_baselines3 import A2C
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    gym.register_envs(ale_py)
    torch.set_num_threads(args.torch_threads)
    # SB3's AtariWrapper skips 4 frames itself: the v5 env's own frame skip goes to 1.
    kwargs = {"frameskip": 1} if "-v5" in args.env else None
    env = make_atari_env(args.env, n_envs=args.num_envs, seed=0, env_kwargs=kwargs)
    env = VecFrameStack(env, n_stack=4)
    model = A2C("CnnPolicy", env, seed=0, device="cpu", verbose=0)
    start = time.time()
    model.learn(total_timesteps=args.steps)
    seconds = time.time() - start
    print(json.dumps({"final": True, "step": int(model.num_timesteps),
                      "train_sps": model.num_timesteps / seconds,
                      "torch_threads": torch.get_num_threads()}), flush=True)  # fmt: skip


def run_ceiling(args: argparse.Namespace) -> float:
    """The env-only ceiling: ``--num_envs`` of ``--env`` stepped alone (benchmarks/ceiling.py)."""
    return measure_subprocess(args.env, args.num_envs, args.ceiling_steps)["sps"]


def _last_json(stdout: str) -> dict:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError(f"no JSON line in the output: {stdout[-500:]}")


def run_ours(system: str, args: argparse.Namespace, workdir: str, round_: int) -> dict:
    """The final JSON line of one training run of ``system``, with its steady state's
    ``steady_sps`` and ``steady_cpu_ms_per_step`` (:func:`steady_state`)."""
    logdir = os.path.join(workdir, f"{system}-{round_}")
    path, extra, cwd = system_flagfile(system, args)
    cmd = [sys.executable, "-m", "experiments.train", f"--flagfile={path}",
           f"--logdir={logdir}", *system_flags(system, args),
           f"--total_steps={args.resnet_steps if system in RESNET else args.steps}",
           "--eval_every=0", "--eval_episodes=1",
           "--export=false", "--stop_return=1e9"]  # fmt: skip
    final = _run(cmd, cwd)
    return {**final, **steady_state(os.path.join(logdir, "metrics.jsonl"))}


def steady_state(path: str, skip: float = 0.25) -> dict:
    """Agent steps/s and CPU ms per step of a run's metrics rows past the first ``skip`` of
    its steps (start-up and tracing left out); None each where the rows do not tell (an
    older tree's trainer may write none, or rows without ``cpu_ms_per_step``)."""
    unknown = {"steady_sps": None, "steady_cpu_ms_per_step": None}
    if not os.path.exists(path):
        return unknown
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if "sps" in r and r.get("cpu_ms_per_step") is not None]
    if len(rows) < 3:
        return unknown
    last = rows[-1]["step"]
    kept = [r for r in rows if r["step"] > skip * last]
    first = max(i for i, r in enumerate(rows) if r["step"] <= skip * last)
    span = kept[-1]["step"] - rows[first]["step"]
    seconds = kept[-1]["wall_time"] - rows[first]["wall_time"]
    steps = [b["step"] - a["step"] for a, b in zip([rows[first], *kept], kept)]
    cpu = sum(r["cpu_ms_per_step"] * n for r, n in zip(kept, steps)) / max(sum(steps), 1)
    return {"steady_sps": span / seconds if seconds > 0 else None, "steady_cpu_ms_per_step": cpu}


def system_flags(system: str, args: argparse.Namespace) -> list[str]:
    """The flags a system's run adds to its flagfile: the environment, its share of
    ``--num_envs`` and the system's own."""
    path, extra, _ = system_flagfile(system, args)
    return [f"--env={args.env}", f"--num_envs={args.num_envs // flagfile_actors(path)}", *extra]


def run_stages(system: str, args: argparse.Namespace) -> dict:
    """CPU ms per agent step of each stage of ``system`` alone (``stage_costs.py``)."""
    path, _, _ = system_flagfile(system, args)
    return measure_stages(path, system_flags(system, args), args.stage_seconds)


def system_flagfile(system: str, args: argparse.Namespace) -> tuple[str, tuple, str]:
    """``(flagfile path, extra flags, working directory)`` of one of our systems."""
    if system == "baseline":
        tree = os.path.abspath(args.baseline_tree)
        return os.path.join(tree, args.baseline_flagfile), (), tree
    flagfile, extra = CONFIGS[system]
    return os.path.join(ROOT, "experiments", "configs", flagfile), extra, ROOT


def flagfile_actors(path: str) -> int:
    """The ``--num_actors`` of a flagfile, nested flagfiles included (1 when it has none;
    ``tfagents_vtrace.utils.flagfiles``, the project's flagfile reader)."""
    from tfagents_vtrace.utils.flagfiles import flag_texts, flagfile_lines

    return int(flag_texts(flagfile_lines(path)).get("num_actors", 1))


def run_sb3(threads: int, args: argparse.Namespace) -> float:
    cmd = [sys.executable, os.path.abspath(__file__), "--sb3_worker", f"--env={args.env}",
           f"--steps={args.steps}", f"--num_envs={args.num_envs}",
           f"--torch_threads={threads}"]  # fmt: skip
    return _run(cmd)["train_sps"]


def _run(cmd: list[str], cwd: str = ROOT) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])}... failed:\n{proc.stderr[-3000:]}")
    return _last_json(proc.stdout)


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="ALE/Pong-v5")
    p.add_argument("--steps", type=int, default=60_000)
    p.add_argument("--resnet_steps", type=int, default=10_000, help="steps of resnet_lstm")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument(
        "--ceiling_steps", type=int, default=10_000, help="steps of the env-only ceiling"
    )
    p.add_argument("--num_envs", type=int, default=8)
    p.add_argument("--torch_threads", default="1,2")
    p.add_argument("--systems", default="ours,resnet_lstm,sb3_a2c")
    p.add_argument(
        "--stage_seconds", type=float, default=3.0,
        help="seconds per stage of the per-stage CPU costs (0: not measured)",
    )  # fmt: skip
    p.add_argument("--baseline_tree", default="", help="checkout of an older commit")
    p.add_argument(
        "--baseline_flagfile",
        default="experiments/configs/impala_atari_pong.cfg",
        help="flagfile of the baseline system, relative to --baseline_tree",
    )
    p.add_argument("--sb3_worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.sb3_worker:
        args.torch_threads = int(args.torch_threads)
        return args
    args.systems = [s for s in args.systems.split(",") if s]
    if args.baseline_tree and "baseline" not in args.systems:
        args.systems.append("baseline")
    if "baseline" in args.systems:
        path = os.path.join(args.baseline_tree, args.baseline_flagfile)
        if not args.baseline_tree or not os.path.isfile(path):
            p.exit(2, f"error: --baseline_tree/--baseline_flagfile: no flagfile at {path!r}\n")
    bad = [s for s in args.systems if s not in NEEDS]
    if bad:
        p.exit(2, f"error: --systems: unknown {bad}; expected some of {sorted(NEEDS)}\n")
    missing = sorted({m for s in args.systems for m in NEEDS[s]
                      if importlib.util.find_spec(m) is None})  # fmt: skip
    if missing:
        p.exit(2, f"error: --systems: needs {missing} (pip install -e '.[atari,bench]')\n")
    args.torch_threads = [int(t) for t in args.torch_threads.split(",") if t]
    if args.steps < 1 or args.rounds < 1 or args.num_envs < 1:
        p.exit(2, "error: --steps, --rounds and --num_envs: expected ints >= 1\n")
    for system in (s for s in args.systems if s != "sb3_a2c"):
        actors = flagfile_actors(system_flagfile(system, args)[0])
        if args.num_envs % actors:
            p.exit(2, f"error: --num_envs: {args.num_envs} does not split over the {system} "
                      f"config's {actors} actor threads\n")  # fmt: skip
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.sb3_worker:
        sb3_worker(args)
        return
    print(machine_line(), flush=True)
    names = ["env_only"] + [s for s in args.systems if s != "sb3_a2c"]
    if "sb3_a2c" in args.systems:
        names += [f"sb3_a2c_{t}t" for t in args.torch_threads]
    sps: dict[str, list[float]] = {name: [] for name in names}
    stages: dict[str, list[dict]] = {}
    resnet = [s for s in args.systems if s in RESNET]
    print(f"{args.env}, {args.num_envs} envs, {args.steps} agent steps per run"
          + (f" ({args.resnet_steps} for {', '.join(resnet)})" if resnet else ""),
          flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as workdir:
        for round_ in range(args.rounds):
            for name in names:
                if name == "env_only":
                    value = run_ceiling(args)
                elif name.startswith("sb3_a2c_"):
                    value = run_sb3(int(name.split("_")[-1][:-1]), args)
                else:
                    final = run_ours(name, args, workdir, round_)
                    value = final["train_sps"]
                    if args.stage_seconds > 0 and name != "baseline":
                        row = cap_row(run_stages(name, args), final["steady_sps"],
                                      final["steady_cpu_ms_per_step"])  # fmt: skip
                        stages.setdefault(name, []).append(row)
                        print(f"round {round_}: {name} stages: " + stage_text(row), flush=True)
                sps[name].append(value)
                print(f"round {round_}: {name}: {value:.1f} steps/s", flush=True)
    medians = {name: statistics.median(v) for name, v in sps.items()}
    sb3 = {n: m for n, m in medians.items() if n.startswith("sb3_a2c_")}
    best = max(sb3.values()) if sb3 else None
    refs = [r for r in ("resnet_lstm_xla_f32", "baseline") if r in medians]
    ceiling = medians["env_only"]
    print("| system | median steps/s | of env-only ceiling | runs | to SB3 A2C at its best |"
          + "".join(f" to {r} |" for r in refs))  # fmt: skip
    print("|---|---|---|---|---|" + "---|" * len(refs))
    for name, median in medians.items():
        ratio = f"{median / best:.2f}x" if best else "-"
        of_ceiling = format_fraction(fraction(median, ceiling))
        to_ref = "".join(
            f" {median / medians[r]:.2f}x |" if name in RESNET else " - |" for r in refs
        )
        print(f"| {name} | {median:.1f} | {of_ceiling} | {len(sps[name])} | {ratio} |{to_ref}")
    stage_medians = print_stage_table(stages, medians)
    print(json.dumps({"medians": medians, "runs": sps, "sb3_best": best,
                      "env_only_ceiling": ceiling, "machine": machine_info(),
                      "stages": stage_medians, "stage_runs": stages,
                      "wall_time": time.time() - START_TIME}))  # fmt: skip


STAGE_FIELDS = (*STAGES, "other", "train_cpu", "cap", "sps", "of_cap")


def stage_text(row: dict) -> str:
    """One round's stage costs, for the progress lines."""
    parts = [f"{k} {row[k]:.3f}" for k in (*STAGES, "other", "train_cpu") if row[k] is not None]
    return "CPU ms per agent step " + ", ".join(parts) + f"; cap {row['cap']:.0f} steps/s"


def print_stage_table(stages: dict[str, list[dict]], medians: dict) -> dict:
    """Prints the per-stage table (medians over rounds); returns it by system."""
    if not stages:
        return {}
    table = {}
    for name, rows in stages.items():
        values = {k: [r[k] for r in rows if r[k] is not None] for k in STAGE_FIELDS}
        table[name] = {k: statistics.median(v) if v else None for k, v in values.items()}
    print(
        "\nCPU ms per agent step, each stage alone; other = the training run's CPU per step"
        " minus the three (steady state: rows past its first quarter); cap = cores / (env +"
        " inference + learner)"
    )
    print("| system | env | inference | learner | other | training's CPU | cap steps/s | "
          "steady steps/s | of cap |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    fmt = lambda x: "-" if x is None else f"{x:.3f}"  # noqa: E731
    percent = lambda x: "-" if x is None else f"{x:.0%}"  # noqa: E731
    for name, row in table.items():
        cells = [fmt(row[k]) for k in (*STAGES, "other", "train_cpu")]
        cells += [f"{row['cap']:.0f}", fmt(row["sps"]), percent(row["of_cap"])]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return table


if __name__ == "__main__":
    main()
