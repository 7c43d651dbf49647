"""Where a training step's CPU goes: the CPU time per agent step of each stage, alone.

    python benchmarks/stage_costs.py --config=impala_atari_pong [--seconds=5] [FLAG ...]

For a shipped config (or a flagfile path) with any further ``--name=value`` flags, this
process builds what a training run builds and times each stage of an agent step on its own,
in CPU seconds of the whole process (every thread's, ``time.process_time``) per agent step:

* ``env``: one of the actor's vector environments (``make_vector_env`` with the run's
  ``--num_envs / --env_groups`` environments, mode and settings) stepped with random
  actions, no network (:func:`ceiling.measure`);
* ``inference``: the actor's acting policy (``make_policy`` with the run's
  ``--policy_impl``, as the actor builds it) stepped over observations an actor recorded,
  as many per call as the actor gives it (``num_envs / env_groups``);
* ``learner``: ``train_step`` of the run's learner on batches of recorded unrolls
  (``batch_unrolls`` per update), every epoch and minibatch of the update included.

Each stage runs for at least ``--seconds`` after a warm-up; its wall time per agent step is
given too (``wall``: CPU over wall is how many cores the stage keeps busy alone). Two cores
(or however many this process may use) spread over the three stages' sum give the
throughput cap that perfect packing would reach: ``cores / (env + inference + learner)``
agent steps per second. A training run's own CPU per step (``cpu_ms_per_step`` of its
metrics rows) minus the sum is the rest (queues, stacking, publishing weights, the
threads' hand-offs): :func:`cap_row` gives both. Prints one JSON line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

_HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(_HERE)
STAGES = ("env", "inference", "learner")


def usable_cores() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def timed(call, seconds: float) -> tuple[int, float, float]:
    """``(calls, CPU seconds, wall seconds)`` of ``call()`` repeated for at least
    ``seconds`` of wall time after one warm-up call."""
    call()
    calls, start, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        call()
        calls += 1
        wall = time.perf_counter() - start
        if wall >= seconds:
            return calls, time.process_time() - cpu, wall


def settings_of(flags: list[str]) -> dict:
    """``--name=value`` / ``--name`` / ``--noname`` flags -> ``{name: value}`` settings."""
    out = {}
    for flag in flags:
        name, eq, value = flag.lstrip("-").partition("=")
        if eq:
            out[name] = value
        elif name.startswith("no"):
            out[name[2:]] = False
        else:
            out[name] = True
    return out


def measure(config: str, flags: list[str], seconds: float = 5.0) -> dict:
    """CPU milliseconds per agent step of each of :data:`STAGES` (module docstring), in
    this process."""
    sys.path.insert(0, _HERE)
    try:
        import ceiling
    finally:
        sys.path.remove(_HERE)
    import tfagents_vtrace as tv
    from tfagents_vtrace.runtime.acting.actor import Actor, ActorSpec, build_network, group_size
    from tfagents_vtrace.runtime.acting.unroll_sources import stack_unrolls

    configs = tv.make_configs(flagfile=config, **settings_of(flags))
    run, net_config = configs.run_config, configs.network_config
    spec = ActorSpec(run.env_id, net_config, run.num_envs, run.unroll_length, seed=run.seed,
                     env_mode=run.env_mode, policy_impl=run.policy_impl,
                     env_groups=run.env_groups, env_kwargs=run.env_kwargs)  # fmt: skip
    network = lambda: build_network(net_config, run.env_id, run.env_kwargs)  # noqa: E731
    learner = configs.spec.run_agent.Learner(configs.agent_config, network, None, 10**6, seed=0)
    actor = Actor(spec, 0)
    actor.set_weights(0, learner.get_weights())
    recorded = [actor.unroll()[0] for _ in range(max(2, run.batch_unrolls))]
    policy = actor.policy
    actor.close()
    n = group_size(spec)  # environments per vector and per policy call
    env = ceiling.measure(run.env_id, n, 1, mode=run.env_mode, env_kwargs=run.env_kwargs,
                          seconds=seconds)  # fmt: skip

    steps = [(u, t) for u in recorded for t in range(run.unroll_length)]
    state = policy.initial_state(n)
    cursor = [0]

    def act():
        u, t = steps[cursor[0] % len(steps)]
        cursor[0] += 1
        policy.step(u["observation"][t][:n], u["first"][t][:n], u["prev_action"][t][:n],
                    u["prev_reward"][t][:n], state)  # fmt: skip

    act_calls, act_cpu, act_wall = timed(act, seconds)
    batches = [stack_unrolls((recorded[i:] + recorded[:i])[: run.batch_unrolls])
               for i in range(len(recorded))]  # fmt: skip
    turn = [0]

    def update():
        learner.train_step(batches[turn[0] % len(batches)])
        turn[0] += 1

    updates, learn_cpu, learn_wall = timed(update, seconds)
    per_update = run.batch_unrolls * run.unroll_length * run.num_envs
    acted = act_calls * n
    return {
        "config": config,
        "flags": flags,
        "policy": type(policy).__name__,
        "num_envs": run.num_envs,
        "env": env["cpu_ms_per_step"],
        "inference": 1e3 * act_cpu / acted,
        "learner": 1e3 * learn_cpu / (updates * per_update),
        "cores": usable_cores(),
        # wall milliseconds per agent step alone: CPU / wall is the cores a stage keeps busy
        "wall": {
            "env": 1e3 / env["sps"],
            "inference": 1e3 * act_wall / acted,
            "learner": 1e3 * learn_wall / (updates * per_update),
        },
    }


def measure_subprocess(config: str, flags: list[str], seconds: float = 5.0,
                       env: dict | None = None) -> dict:  # fmt: skip
    """:func:`measure` in a fresh process (this file as a script, cwd the repository root,
    ``env`` added to its environment); raises ``RuntimeError`` with its stderr's tail when
    it fails."""
    cmd = [sys.executable, os.path.abspath(__file__), f"--config={config}",
           f"--seconds={seconds}", *flags]  # fmt: skip
    environ = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {}))
    proc = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"stage costs of {config} failed (rc={proc.returncode}):\n"
                           f"{proc.stderr[-3000:]}")  # fmt: skip
    return json.loads(lines[-1])


def cap(stages: dict) -> float:
    """Agent steps per second that ``stages[cores]`` cores reach when the three stages'
    CPU per step (milliseconds) pack perfectly."""
    return 1e3 * stages["cores"] / sum(stages[s] for s in STAGES)


def cap_row(stages: dict, sps: float | None, train_cpu_ms: float | None) -> dict:
    """The per-stage fields of a throughput table's row: each stage's CPU ms per step, the
    rest of the training run's own CPU per step (``train_cpu_ms`` minus the three), the cap
    and ``sps`` as a fraction of it (None where ``sps`` or ``train_cpu_ms`` is)."""
    total = sum(stages[s] for s in STAGES)
    other = None if train_cpu_ms is None else train_cpu_ms - total
    return {**{s: stages[s] for s in STAGES}, "other": other, "train_cpu": train_cpu_ms,
            "cap": cap(stages), "sps": sps,
            "of_cap": None if sps is None else sps / cap(stages)}  # fmt: skip


def main(argv=None) -> None:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", required=True, help="a shipped config's name or a .cfg path")
    p.add_argument("--seconds", type=float, default=5.0, help="per stage, after a warm-up")
    args, flags = p.parse_known_args(argv)
    bad = [f for f in flags if not f.startswith("--")]
    if bad:
        p.error(f"unexpected argument {bad[0]!r} (flags are written --NAME=VALUE)")
    print(json.dumps(measure(args.config, flags, args.seconds)), flush=True)


if __name__ == "__main__":
    # benchmarks/minatar.py would shadow the `minatar` package: run from the repository root.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    sys.path.insert(0, ROOT)
    main()
