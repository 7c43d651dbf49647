"""The learner update's CPU cost per agent step, across ISA caps, XLA, oneDNN, threads, dtype.

    python benchmarks/learner_cost.py [--config=impala_atari_pong] [--rounds=3] [--updates=4]
        [--variants=NAME,...] [--variant='NAME: TOKEN ...'] [--reference=NAME]
        [--profile=NAME,...] [--onednn_profile=NAME,...] [--quick]

One flagfile's learner (``ImpalaLearner.train_step`` of the flagfile's network, optimizer and
update, built by ``benchmarks/learner_intake.py``'s ``Bench`` on its stub Pong-shaped
environment: random uint8 frames, which cost what the game's frames cost) trains on the
same recorded batch, in a fresh subprocess per variant and round, the variants taking turns
round by round. A variant is a name and tokens: ``--flag=value`` (settings over the
flagfile, as on ``tfv-train``'s command line), ``KEY=VALUE`` (an environment variable of
the subprocess, e.g. ``TF_ENABLE_ONEDNN_OPTS=0``), ``isa=avx2`` / ``isa=avx512`` (the
emulated CPU: ``ONEDNN_MAX_CPU_ISA`` and ``XLA_FLAGS=--xla_cpu_max_isa`` capped, see
below), ``intra=N`` / ``inter=N`` (TensorFlow's intra- and inter-op thread pools, set
before TensorFlow runs an op), ``tree=PATH`` (the package imported from another checkout,
first on the subprocess's ``PYTHONPATH``, this script's harness unchanged: two trees compared
in one run, round by round). Each subprocess traces the update, runs ``--warmup``
updates, then times ``--updates`` updates one by one: CPU seconds of the whole process
(``time.process_time``: every thread's) and wall seconds, per agent step (the batch's
``unroll_length x num_envs``); the medians over the updates are one round's figure, and
the table gives the medians over rounds, each also as a ratio to ``--reference``.

The emulation: ``isa=avx2`` sets ``ONEDNN_MAX_CPU_ISA=AVX2`` (oneDNN's JIT dispatch, which
runs TensorFlow's convolutions and matmuls while ``TF_ENABLE_ONEDNN_OPTS`` is on: checked
by the subprocess through ``ONEDNN_VERBOSE``'s ``isa:`` line, printed in the table) and
``--xla_cpu_max_isa=AVX2`` (the LLVM code XLA emits). It cannot cap TensorFlow's own Eigen
kernels, which the wheel compiles for its baseline ISA (AVX) and so are the same code on
every x86 CPU, nor the XNNPACK / YNNPACK kernels XLA calls (they dispatch on the CPU they
find), and it cannot run bfloat16 through oneDNN on AVX2: TensorFlow hands bfloat16 ops to
oneDNN after its own CPU check, and oneDNN capped at AVX2 has no bfloat16 convolution (the
``avx2_bf16_eigen`` variant runs them in TensorFlow's Eigen kernels instead, as an AVX2-only
CPU does). What it cannot show at all: another CPU's clock, caches and microarchitecture
(an AVX2-only AMD core's 256-bit or 128-bit FMA pipes against this core's).

FLOPs: the forward multiply-adds (MACs) of the network's convolutions and dense layers
(from the built layers' shapes), counted per agent step of the update as 2 FLOPs per
multiply-add of one forward pass over the batch (the V-trace targets) and then, per epoch,
a forward pass and the backward pass (two forward passes' work: the weights' gradient and
the input's, less the first convolution's input gradient, which nothing needs);
``GFLOP per CPU s`` divides them by the measured CPU seconds (against a core's peak, 2 FMA
pipes x 8 float32 lanes x 2 FLOPs = 32 FLOPs per cycle with AVX2 and 64 with full-width
AVX-512, it gives the share of the peak the update reaches, for a clock).

``--profile=NAME,...`` traces two updates of those variants with ``tf.profiler`` after the
timing (in its last round) and prints the ops that take the time (self time per op type
on the host threads); ``--onednn_profile=NAME,...`` runs one more subprocess of each, whose
oneDNN primitives are timed by oneDNN itself (``ONEDNN_VERBOSE=profile_exec``: per primitive
kind, implementation and direction). The first line is the machine
(``benchmarks/machine.py``); the last is JSON. Running on a shared machine: quote the load
average printed with it. The default variants (all but the XLA ones, :data:`XLA_VARIANTS`)
take about 8 minutes on 2 idle cores; a bad flag ends with one line and exit code 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

_BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_BENCH)

DEFAULT_CONFIG = "impala_atari_pong"
WAITS = ("Run", "Process", "FunctionRun", "ParallelFor", "BlockUntilReady",
         "ThunkExecutor::Execute", "ExecutorState::Process",
         "KernelAndDeviceFunc::Run")  # fmt: skip
"""Profiler events of the executors, not ops: their self time is mostly waiting for ops."""
ISA_CAPS = {
    # name: (ONEDNN_MAX_CPU_ISA, --xla_cpu_max_isa)
    "avx2": ("AVX2", "AVX2"),
    "avx512": ("AVX512_CORE", "AVX512"),
    "avx512_bf16": ("AVX512_CORE_BF16", "AVX512_BF16"),
}
VARIANTS = {
    # The shipped file on this CPU and on an emulated AVX2-only one (float32, as "auto"
    # resolves there), then one option changed at a time.
    "native_bf16": "--cnn_compute_dtype=bfloat16",
    "native_f32": "--cnn_compute_dtype=float32",
    "native_f32_xla": "--cnn_compute_dtype=float32 --jit_compile",
    "native_bf16_xla": "--cnn_compute_dtype=bfloat16 --jit_compile",
    "avx2_f32": "isa=avx2 --cnn_compute_dtype=float32",
    # oneDNN capped at AVX2 has no bfloat16 convolution, and TensorFlow hands bfloat16 ops
    # to oneDNN after its own CPU check (which finds this CPU's AVX-512): an AVX2-only CPU
    # runs them in TensorFlow's Eigen kernels, which TF_ENABLE_ONEDNN_OPTS=0 gives here.
    "avx2_bf16_eigen": "isa=avx2 --cnn_compute_dtype=bfloat16 TF_ENABLE_ONEDNN_OPTS=0",
    "avx2_f32_xla": "isa=avx2 --cnn_compute_dtype=float32 --jit_compile",
    "avx2_f32_xla_onednn": "isa=avx2 --cnn_compute_dtype=float32 --jit_compile "
    "XLA_FLAGS=--xla_cpu_use_onednn=true",
    "avx2_f32_noonednn": "isa=avx2 --cnn_compute_dtype=float32 TF_ENABLE_ONEDNN_OPTS=0",
    "avx2_f32_intra1": "isa=avx2 --cnn_compute_dtype=float32 intra=1 inter=1",
    "avx2_f32_inter1": "isa=avx2 --cnn_compute_dtype=float32 intra=2 inter=1",
    "avx512_f32": "isa=avx512 --cnn_compute_dtype=float32",
    "avx512_bf16": "isa=avx512 --cnn_compute_dtype=bfloat16",
}
XLA_VARIANTS = ("native_f32_xla", "native_bf16_xla", "avx2_f32_xla", "avx2_f32_xla_onednn")
"""About 9 s of wall an update of the Pong config (2 idle cores; 30 s loaded) and 13-60 s
to compile: named on their own, with ``--rounds=1 --updates=1 --warmup=0``, not among the
defaults."""
DEFAULT_VARIANTS = ",".join(name for name in VARIANTS if name not in XLA_VARIANTS)
DEFAULT_REFERENCE = "avx2_f32"


# ---------------------------------------------------------------------------- variants
def parse_variant(name: str, text: str) -> dict:
    """``{"name", "flags", "env", "intra", "inter", "isa"}`` (and ``"tree"`` when given) of a
    variant's tokens (module docstring).

    Raises:
      ValueError: naming the variant and the token it cannot read.
    """
    out = {"name": name, "flags": [], "env": {}, "intra": 0, "inter": 0, "isa": "native"}
    tree = None
    for token in shlex.split(text):
        key, sep, value = token.partition("=")
        if token.startswith("--"):
            out["flags"].append(token)
        elif key == "isa" and sep:
            if value not in ISA_CAPS and value != "native":
                raise ValueError(f"variant {name!r}: isa: expected one of "
                                 f"{('native', *ISA_CAPS)}, received {value!r}")  # fmt: skip
            out["isa"] = value
        elif key in ("intra", "inter") and sep:
            if not value.isdigit():
                raise ValueError(f"variant {name!r}: {key}: expected an int >= 0, "
                                 f"received {value!r}")  # fmt: skip
            out[key] = int(value)
        elif key == "tree" and sep:
            tree = os.path.abspath(os.path.expanduser(value))
            if not os.path.isfile(os.path.join(tree, "tfagents_vtrace", "__init__.py")):
                raise ValueError(f"variant {name!r}: tree: expected a checkout holding "
                                 f"tfagents_vtrace/, received {value!r}")  # fmt: skip
        elif sep and key and key.upper() == key:
            out["env"][key] = value
        else:
            raise ValueError(f"variant {name!r}: cannot read token {token!r}")
    if tree is not None:
        out["tree"] = tree
    return out


def variant_environment(variant: dict, base: dict | None = None) -> dict:
    """The subprocess's environment: ``base`` (default ``os.environ``), the ISA caps of
    ``variant["isa"]`` (``XLA_FLAGS`` appended to), then its own variables."""
    env = dict(os.environ if base is None else base)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["ONEDNN_VERBOSE"] = "profile_create"  # the ISA line; primitives once, as created
    if variant["isa"] in ISA_CAPS:
        onednn, xla = ISA_CAPS[variant["isa"]]
        env["ONEDNN_MAX_CPU_ISA"] = onednn
        env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_cpu_max_isa={xla}".strip()
    for key, value in variant["env"].items():  # XLA_FLAGS: appended to the ISA cap's
        env[key] = f"{env.get(key, '')} {value}".strip() if key == "XLA_FLAGS" else value
    first = variant.get("tree", ROOT)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (first, env.get("PYTHONPATH")) if p)
    return env


# ---------------------------------------------------------------------------- worker
def forward_macs(network) -> dict:
    """Multiply-adds of one forward pass of one observation through ``network``'s Conv2D
    and Dense layers, by layer, from the shapes the layers were built with; the layer that
    takes the largest input first (the first convolution, which reads the frames)."""
    import keras

    macs, sizes = {}, {}
    for layer in network._flatten_layers(include_self=False, recursive=True):
        if not isinstance(layer, keras.layers.Conv2D | keras.layers.Dense):
            continue
        shape = (getattr(layer, "_build_shapes_dict", None) or {}).get("input_shape")
        kernel = [int(d) for d in layer.kernel.shape]
        sizes[layer.path] = 0 if shape is None else math.prod(shape[1:])
        if isinstance(layer, keras.layers.Dense):
            macs[layer.path] = kernel[0] * kernel[1]
        elif shape is not None:
            out = layer.compute_output_shape((1, *shape[1:]))
            macs[layer.path] = int(out[1]) * int(out[2]) * math.prod(kernel)
    return dict(sorted(macs.items(), key=lambda kv: -sizes[kv[0]]))


def update_flops(macs: dict, epochs: int) -> int:
    """FLOPs of one agent step's share of the update (module docstring): one forward pass,
    then ``epochs`` times a forward pass and the backward pass (the weights' gradient of
    every layer, the input's of every layer but the first, whose input is the frames)."""
    forward = sum(macs.values())
    backward = 2 * forward - (next(iter(macs.values())) if macs else 0)
    return 2 * (forward * (1 + epochs) + backward * epochs)


def onednn_exec_profile(text: str, steps: int) -> dict:
    """oneDNN's primitive executions in ``ONEDNN_VERBOSE=profile_exec`` output ``text``:
    ``{"kind impl direction": ms per agent step}`` (``steps``: the agent steps the output's
    executions cover), largest first."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) < 8 or parts[:4] != ["onednn_verbose", "v1", "primitive", "exec"]:
            continue
        try:
            ms = float(parts[-1])
        except ValueError:
            continue
        key = f"{parts[5]} {parts[6]} {parts[7]}"
        totals[key] = totals.get(key, 0.0) + ms
    return {k: v / steps for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def onednn_isa(stderr_text: str) -> str:
    """oneDNN's ``isa:`` line of ``ONEDNN_VERBOSE`` output ("" when oneDNN did not run)."""
    for line in stderr_text.splitlines():
        if line.startswith("onednn_verbose") and ",isa:" in line:
            return line.split(",isa:", 1)[1].strip()
    return ""


def worker(args: argparse.Namespace) -> None:
    """One variant in this process: prints one JSON line."""
    variant = json.loads(args.worker)
    import tensorflow as tf

    if variant["intra"]:
        tf.config.threading.set_intra_op_parallelism_threads(variant["intra"])
    if variant["inter"]:
        tf.config.threading.set_inter_op_parallelism_threads(variant["inter"])
    sys.path.insert(0, _BENCH)
    import learner_intake

    sys.path.remove(_BENCH)
    import tfagents_vtrace

    tree = os.path.dirname(os.path.dirname(os.path.abspath(tfagents_vtrace.__file__)))
    if os.path.realpath(tree) != os.path.realpath(variant.get("tree", tree)):
        raise SystemExit(f"variant {variant['name']!r}: tfagents_vtrace imported from {tree}, "
                         f"not its tree {variant['tree']}")  # fmt: skip
    shipped = learner_intake.config_file(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, f"{learner_intake.config_name(shipped)}.cfg")
        with open(path, "w", encoding="utf-8") as f:
            f.write("\n".join([f"--flagfile={shipped}", *variant["flags"]]) + "\n")
        started = time.perf_counter()
        bench = learner_intake.Bench(path, argparse.Namespace(stub_env=True), atari=False)
        setup_s = time.perf_counter() - started  # recording + the first (traced) update
    learner, batch = bench.learner, bench.batches[0]
    steps = bench.steps_per_unroll * bench.run.batch_unrolls
    for _ in range(args.warmup):
        learner.train_step(batch)
    cpu, wall = [], []
    for _ in range(args.updates):
        c0, w0 = time.process_time(), time.perf_counter()
        learner.train_step(batch)
        cpu.append((time.process_time() - c0) / steps)
        wall.append((time.perf_counter() - w0) / steps)
    profile = profile_ops(learner, batch, steps) if args.profile_worker else None
    macs = forward_macs(learner.network)
    epochs = int(getattr(bench.learner.config, "num_epochs", 1))
    flops = update_flops(macs, epochs)
    print(json.dumps({
        "variant": variant["name"], "cpu_s_per_step": statistics.median(cpu),
        "wall_s_per_step": statistics.median(wall), "cpu_runs": cpu, "wall_runs": wall,
        "steps_per_update": steps, "setup_s": setup_s, "forward_macs": macs,
        "flops_per_step": flops, "num_epochs": epochs,
        "intra": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter": tf.config.threading.get_inter_op_parallelism_threads(),
        "compute_dtype": getattr(learner.network, "cnn_compute_dtype",
                                 bench.net_config.cnn_compute_dtype),  # "auto" resolved
        "profile": profile, "tree": tree,
    }), flush=True)  # fmt: skip


def profile_ops(learner, batch, steps: int, updates: int = 2) -> dict:
    """Self time per op type of ``updates`` traced updates (``tf.profiler``): each event's
    duration on the thread that ran it less the events nested in it, in seconds per agent
    step, largest first (the 25 largest). TensorFlow's ops ("name:type" events, by type),
    XLA's thunks (by HLO name, e.g. ``Conv2DBackpropFilter.12``) and the executors' own
    events (:data:`WAITS`, which hold their waits for the ops). An op's time includes its
    wait for the pool threads it spreads its work over: its wall time, not its CPU time."""
    import tensorflow as tf
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    with tempfile.TemporaryDirectory() as logdir:
        tf.profiler.experimental.start(logdir)
        for _ in range(updates):
            learner.train_step(batch)
        tf.profiler.experimental.stop()
        spaces = [os.path.join(d, f) for d, _, fs in os.walk(logdir) for f in fs
                  if f.endswith(".xplane.pb")]  # fmt: skip
        space = xplane_pb2.XSpace()
        with open(spaces[0], "rb") as f:
            space.ParseFromString(f.read())
    totals: dict[str, float] = {}
    for plane in space.planes:
        if not plane.name.startswith("/host:CPU"):
            continue
        names = {k: m.name for k, m in plane.event_metadata.items()}
        for line in plane.lines:
            stack: list[dict] = []
            for e in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
                while stack and stack[-1]["end"] <= e.offset_ps:
                    _pop(stack, totals)
                name = names.get(e.metadata_id, "?")
                stack.append({"end": e.offset_ps + e.duration_ps, "dur": e.duration_ps,
                              "name": name, "child": 0})  # fmt: skip
            while stack:
                _pop(stack, totals)
    per_step = {k: v / 1e12 / (updates * steps) for k, v in totals.items()}
    return dict(sorted(per_step.items(), key=lambda kv: -kv[1])[:25])


def _pop(stack: list[dict], totals: dict) -> None:
    """Pops the innermost open event: its self time (its duration less its children's)
    goes to ``totals`` under its op type (the part after the last ':' of "name:type"), its
    duration to its parent's children."""
    event = stack.pop()
    name = event["name"]
    kind = name if "::" in name else name.rsplit(":", 1)[-1]
    totals[kind] = totals.get(kind, 0) + max(event["dur"] - event["child"], 0)
    if stack:
        stack[-1]["child"] += event["dur"]


# ---------------------------------------------------------------------------- driver
def run_variant(
    variant: dict, args: argparse.Namespace, profile: bool, onednn_exec: bool = False
) -> dict:
    """One subprocess of ``variant``; with ``onednn_exec``, three updates (the traced one,
    a warm-up, a timed one) under ``ONEDNN_VERBOSE=profile_exec``, their primitives' times
    per agent step in ``onednn_exec`` (the first update's include the primitives'
    creation)."""
    updates, warmup = (1, 1) if onednn_exec else (args.updates, args.warmup)
    cmd = [sys.executable, os.path.abspath(__file__), f"--config={args.config}",
           f"--updates={updates}", f"--warmup={warmup}",
           f"--worker={json.dumps(variant)}"]  # fmt: skip
    if profile:
        cmd.append("--profile_worker")
    env = variant_environment(variant)
    if onednn_exec:
        env["ONEDNN_VERBOSE"] = "profile_exec"
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode or not lines:
        tail = "\n".join(proc.stderr.splitlines()[-15:])
        raise RuntimeError(f"variant {variant['name']!r} failed ({proc.returncode}):\n{tail}")
    result = json.loads(lines[-1])
    result["onednn_isa"] = onednn_isa(proc.stdout + "\n" + proc.stderr)
    if onednn_exec:  # the traced first update's, the warm-up's and the timed one's
        steps = 3 * result["steps_per_update"]
        result["onednn_exec"] = onednn_exec_profile(proc.stdout, steps)
    return result


def summarize(runs: dict[str, list[dict]], reference: str) -> dict:
    """Per variant: medians over rounds of CPU and wall seconds per agent step, their
    ratios to ``reference``'s, GFLOP per CPU second, oneDNN's ISA and the resolved dtype."""
    out = {}
    ref_cpu = statistics.median(r["cpu_s_per_step"] for r in runs[reference])
    ref_wall = statistics.median(r["wall_s_per_step"] for r in runs[reference])
    for name, results in runs.items():
        cpu = statistics.median(r["cpu_s_per_step"] for r in results)
        wall = statistics.median(r["wall_s_per_step"] for r in results)
        flops = results[0]["flops_per_step"]
        out[name] = {
            "cpu_ms_per_step": 1e3 * cpu,
            "wall_ms_per_step": 1e3 * wall,
            "cpu_ratio": cpu / ref_cpu,
            "wall_ratio": wall / ref_wall,
            "gflops_per_cpu_s": flops / cpu / 1e9,
            "rounds_cpu_ms": [round(1e3 * r["cpu_s_per_step"], 4) for r in results],
            "onednn_isa": results[0]["onednn_isa"] or "(oneDNN not run)",
            "compute_dtype": results[0]["compute_dtype"],
            "threads": f"{results[0]['intra']}/{results[0]['inter']}",
        }
    return out


def print_table(summary: dict, variants: dict, reference: str) -> None:
    print(
        f"| variant | tokens | CPU ms per agent step | of {reference} | wall ms per agent "
        "step | of ref | GFLOP per CPU s | rounds (CPU ms) | oneDNN ISA | intra/inter |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, s in summary.items():
        rounds = " / ".join(f"{v:.3f}" for v in s["rounds_cpu_ms"])
        print(f"| {name} | `{variants[name]}` | {s['cpu_ms_per_step']:.3f} | "
              f"{s['cpu_ratio']:.2f} | {s['wall_ms_per_step']:.3f} | {s['wall_ratio']:.2f} | "
              f"{s['gflops_per_cpu_s']:.1f} | {rounds} | {s['onednn_isa']} | "
              f"{s['threads']} |")  # fmt: skip


def print_profile(name: str, profile: dict) -> None:
    """The ops' table of :func:`profile_ops`; shares of the listed ops, waits left out."""
    total = sum(v for k, v in profile.items() if k not in WAITS) or 1.0
    print(f"Ops of {name} (self time on the thread that ran them, ms per agent step; the "
          f"listed ops, waits left out: {1e3 * total:.3f} ms):")  # fmt: skip
    print("| op | ms per agent step | share of the listed ops |")
    print("| --- | --- | --- |")
    for op, seconds in profile.items():
        share = "(wait)" if op in WAITS else f"{seconds / total:.0%}"
        print(f"| {op} | {1e3 * seconds:.4f} | {share} |")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit code 2
        self.exit(2, f"error: {message}\n")


def parse_args(argv=None) -> argparse.Namespace:
    p = _Parser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=DEFAULT_CONFIG, help="an IMPALA flagfile: a shipped "
                   "config's name or a path")  # fmt: skip
    p.add_argument("--variants", default=DEFAULT_VARIANTS, help=f"of {', '.join(VARIANTS)}")
    p.add_argument("--variant", action="append", default=[], help="'NAME: TOKEN ...', "
                   "a variant of one's own (module docstring)")  # fmt: skip
    p.add_argument("--reference", default=DEFAULT_REFERENCE)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--updates", type=int, default=4, help="timed updates per subprocess")
    p.add_argument("--warmup", type=int, default=1, help="untimed updates after the trace")
    p.add_argument("--profile", default="", help="variants to profile (their last round)")
    p.add_argument("--onednn_profile", default="", help="variants whose oneDNN primitives "
                   "to time (ONEDNN_VERBOSE=profile_exec, one more subprocess each)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="smoke test: 1 round, 1 update")
    p.add_argument("--worker", default="", help=argparse.SUPPRESS)
    p.add_argument("--profile_worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return args
    sys.path.insert(0, _BENCH)
    import learner_intake

    sys.path.remove(_BENCH)
    path = learner_intake.config_file(args.config)
    if path is None:
        p.error(f"--config: no flagfile and no shipped config {args.config!r}")
    if learner_intake.flagfile_value(path, "agent") != "impala":
        p.error(f"--config: {args.config!r} is not an IMPALA config (--agent=impala)")
    texts = {}
    for name in (n for n in args.variants.split(",") if n):
        if name not in VARIANTS:
            p.error(f"--variants: unknown {name!r} (one of {', '.join(VARIANTS)})")
        texts[name] = VARIANTS[name]
    for item in args.variant:
        name, sep, text = item.partition(":")
        if not sep or not name.strip():
            p.error(f"--variant: expected 'NAME: TOKEN ...', received {item!r}")
        texts[name.strip()] = text.strip()
    try:
        args.parsed = {name: parse_variant(name, text) for name, text in texts.items()}
    except ValueError as e:
        p.error(str(e))
    args.texts = texts
    if args.reference not in texts:
        p.error(f"--reference: {args.reference!r} is not among the variants")
    args.profile = [n for n in args.profile.split(",") if n]
    args.onednn_profile = [n for n in args.onednn_profile.split(",") if n]
    for name in args.profile + args.onednn_profile:
        if name not in texts:
            p.error(f"--profile: {name!r} is not among the variants")
    if args.quick:
        args.rounds, args.updates, args.warmup = 1, 1, 0
    for name in ("rounds", "updates"):
        if getattr(args, name) < 1:
            p.error(f"--{name}: expected >= 1, received {getattr(args, name)}")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.worker:
        worker(args)
        return
    sys.path.insert(0, _BENCH)
    from machine import machine_info, machine_line

    sys.path.remove(_BENCH)
    info = machine_info()
    print(machine_line(info), flush=True)
    load = os.getloadavg()
    today = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"date {today}; load average at start {' '.join(f'{x:.2f}' for x in load)}; "
          f"config {args.config}; {args.rounds} round(s) x {args.updates} timed update(s) "
          f"per variant, each in a fresh subprocess", flush=True)  # fmt: skip
    runs: dict[str, list[dict]] = {name: [] for name in args.parsed}
    profiles = {}
    for round_ in range(args.rounds):
        for name, variant in args.parsed.items():
            last = round_ == args.rounds - 1 and name in args.profile
            result = run_variant(variant, args, profile=last)
            runs[name].append(result)
            if last:
                profiles[name] = result["profile"]
            print(f"round {round_}: {name}: {1e3 * result['cpu_s_per_step']:.3f} CPU ms, "
                  f"{1e3 * result['wall_s_per_step']:.3f} wall ms per agent step "
                  f"(oneDNN {result['onednn_isa'] or '-'}; {result['compute_dtype']}; "
                  f"set-up {result['setup_s']:.1f} s)", flush=True)  # fmt: skip
    summary = summarize(runs, args.reference)
    first = next(iter(runs.values()))[0]
    print(
        f"FLOPs per agent step of the update: {first['flops_per_step'] / 1e6:.1f} M (forward "
        f"multiply-adds {sum(first['forward_macs'].values()) / 1e6:.2f} M: "
        + ", ".join(f"{k} {v / 1e6:.2f} M" for k, v in first["forward_macs"].items())
        + f"; {first['num_epochs']} epochs: update_flops)"
    )
    print_table(summary, args.texts, args.reference)
    for name, profile in profiles.items():
        print_profile(name, profile)
    onednn = {}
    for name in args.onednn_profile:
        onednn[name] = run_variant(args.parsed[name], args, False, onednn_exec=True)["onednn_exec"]
        total = sum(onednn[name].values())
        print(f"oneDNN primitives of {name} (ONEDNN_VERBOSE=profile_exec, ms per agent step; "
              f"all: {total:.3f} ms):")  # fmt: skip
        print("| primitive implementation direction | ms per agent step | share |")
        print("| --- | --- | --- |")
        for key, ms in list(onednn[name].items())[:12]:
            print(f"| {key} | {ms:.4f} | {ms / total:.0%} |")
    print(json.dumps({"machine": info, "date": today, "load_average": load,
                      "config": args.config, "rounds": args.rounds, "updates": args.updates,
                      "reference": args.reference, "variants": args.texts,
                      "summary": summary, "profiles": profiles, "onednn_profiles": onednn,
                      "flops_per_step": first["flops_per_step"],
                      "runs": {k: [{x: r[x] for x in ("cpu_s_per_step", "wall_s_per_step")}
                                   for r in v] for k, v in runs.items()}}))  # fmt: skip


if __name__ == "__main__":
    main()
