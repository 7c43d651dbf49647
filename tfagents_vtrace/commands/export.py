"""Export a trained policy: ``tfv-export --logdir=DIR --output=PATH``.

``--format=saved_model|tflite|onnx [--check]``.

Rebuilds the network from ``DIR/config.json`` (or, for agents with an ``export_run``, such as
TAAC, lets the agent rebuild its policy and, with ``--check``, check it with its
``check_export``), restores the latest checkpoint in
``DIR/checkpoints`` and writes the SavedModel of DESIGN.md's export contract to PATH
(Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561, is the agent family), or
with ``--format=tflite`` / ``--format=onnx`` one LiteRT / ONNX file
(``tfagents_vtrace.export_litert``, ``tfagents_vtrace.export_onnx``; the ``litert`` / ``onnx``
extras run them). The artefact is written beside PATH and renamed into place: ``--overwrite``
replaces only an artefact of the same format (a SavedModel directory, a LiteRT or ONNX model
file), never another file or non-empty directory, and a failed export keeps the previous one.

``--check`` then runs the trajectory parity check of ``tfagents_vtrace.export_parity``: a
SavedModel of the same weights acts ``--check_steps`` steps in the run's env (episodes cut
so that resets fall inside the window), the artefact replays the same inputs and noise, and
greedy and sampled actions must be identical and every float output within
``1e-5 + 1e-6 * |reference|``. For a
SavedModel the artefact is checked against the restored network in process. One JSON line
reports the max abs differences; a failed check exits with code 1. A TAAC run's files are
checked against a SavedModel whose ``greedy_action`` has ``epsilon_greedy=0``, as theirs
(``tfagents_vtrace.agents.taac.portable``).

A run directory without config or checkpoint, or whose env id is not a registered gymnasium
id (``config.json`` is data: a ``module:`` prefix, which gymnasium would import, is refused),
a PATH that may not be written, a format the run's agent cannot export or whose extra is not
installed, ends with one line on stderr and exit code 2 (``commands.cli``). A run whose
checkpoints are all damaged (none reads back whole) ends with one line naming them and exit
code 1.
"""

import importlib.util
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags  # noqa: E402

from tfagents_vtrace.commands.cli import (  # noqa: E402
    FlagError,
    check_int,
    fault,
    flag_error_from,
    reports_flag_errors,
    run,
)

FLAGS = flags.FLAGS
FORMATS = ("saved_model", "tflite", "onnx")
DEFAULT_NAMES = {"saved_model": "policy", "tflite": "policy.tflite", "onnx": "policy.onnx"}
# The modules each format needs to be written (export) and run (--check), and their extra.
NEEDS = {
    "tflite": ((), ("ai_edge_litert",), "litert"),
    "onnx": (("tf2onnx",), ("onnxruntime",), "onnx"),
}


def define_flags() -> None:
    """Declares the flags of this entry point."""
    flags.DEFINE_string("logdir", None, "Run directory (config.json + checkpoints/).")
    flags.DEFINE_string(
        "env",
        None,
        "The run's environment when it is your own: 'package.module:Env-v0' imports the "
        "module that registers it (an id read from config.json never imports code).",
    )
    flags.DEFINE_string(
        "output",
        None,
        "Where to write the policy: a SavedModel directory, or the .tflite / .onnx file "
        "(default: LOGDIR/policy, LOGDIR/policy.tflite, LOGDIR/policy.onnx).",
    )
    flags.DEFINE_enum(
        "format",
        "saved_model",
        FORMATS,
        "saved_model (TF), tflite (LiteRT, builtin ops, float32; run with the litert extra) "
        "or onnx (tf2onnx; the onnx extra).",
    )
    flags.DEFINE_bool(
        "overwrite",
        False,
        "Replace an existing artefact of --format at --output (nothing else is replaced).",
    )
    flags.DEFINE_bool(
        "check",
        False,
        "After exporting, check trajectory parity with a SavedModel of the same weights "
        "(tfagents_vtrace.export_parity); exit code 1 when it fails.",
    )
    flags.DEFINE_integer("check_steps", 300, "Environment steps of the --check window.")
    flags.mark_flag_as_required("logdir")


def _check_extras(fmt: str, check: bool) -> None:
    """FlagError naming ``--format`` (or ``--check``) when a module the format needs is absent."""
    if fmt not in NEEDS:
        return
    write, run, extra = NEEDS[fmt]
    for flag, modules in (("format", write), ("check", run if check else ())):
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            raise FlagError(
                flag,
                f"{fmt} {'export' if flag == 'format' else 'runs'} needs {', '.join(missing)}: "
                f"pip install 'tfagents_vtrace[{extra}]'",
            )


def _check_output(output: str, fmt: str, overwrite: bool) -> None:
    from tfagents_vtrace.export_target import check_export_file, check_export_path  # no TF

    try:  # a file, a link or a non-empty non-artefact: refused even with --overwrite
        if fmt == "saved_model":
            check_export_path(output, overwrite=True, name="output")
        else:
            check_export_file(output, fmt, overwrite=True, name="output")
    except ValueError as e:
        message = str(e).split(": ", 1)[1]  # "output: ..." -> "--output: ..."
        raise FlagError("output", message.replace("with overwrite", "with --overwrite")) from None
    exists = os.path.isdir(output) and os.listdir(output)
    if fmt != "saved_model":
        exists = os.path.isfile(output) and os.path.getsize(output) > 0
    if exists and not overwrite:
        message = f"{output} exists and is not empty; pass --overwrite to replace it"
        raise FlagError("output", message)


def check_flags(
    logdir: str,
    output: str | None,
    overwrite: bool,
    fmt: str = "saved_model",
    check: bool = False,
    check_steps: int = 300,
) -> str:
    """Checks the run directory, the format and the output path before TensorFlow loads;
    returns the output path (``LOGDIR/policy[.tflite|.onnx]`` when ``output`` is None).

    Raises:
      FlagError: ``logdir`` is not a directory or lacks ``config.json`` or a checkpoint
        (``checkpointing.has_checkpoint``); ``format`` needs a module that is not installed
        (``check`` too, for the runtime the check runs); ``check_steps`` < 2; ``output`` is a
        symbolic link, something that is not an artefact of ``fmt`` (a file or a non-empty
        directory; even with ``overwrite``: export replaces only its own format); or such an
        artefact and ``overwrite`` is False.
    """
    if not os.path.isdir(logdir):
        raise FlagError("logdir", f"no such directory: {logdir}")
    if not os.path.isfile(os.path.join(logdir, "config.json")):
        raise FlagError("logdir", f"no config.json in {logdir} (not a tfv-train run)")
    from tfagents_vtrace.runtime.rundir.checkpointing import has_checkpoint  # no TensorFlow import

    if not has_checkpoint(logdir):
        raise FlagError("logdir", f"no checkpoint in {os.path.join(logdir, 'checkpoints')}")
    if fmt not in FORMATS:
        raise FlagError("format", f"expected one of {', '.join(FORMATS)}, received {fmt!r}")
    _check_extras(fmt, check)
    if check:
        check_int("check_steps", check_steps, 2)
    output = output or os.path.join(logdir, DEFAULT_NAMES[fmt])
    _check_output(output, fmt, overwrite)
    return output


def parity_check(network, path: str, fmt: str, env_id: str, steps: int, env_kwargs=None):
    """The ``--check`` report of artefact ``path`` (see the module docstring)."""
    import tempfile

    from tfagents_vtrace.envs import make_env
    from tfagents_vtrace.export import PolicyModule, export_policy
    from tfagents_vtrace.export_parity import SavedModelRunner, check_parity, open_runner

    env = make_env(env_id, **(env_kwargs or {}))
    try:
        if fmt == "saved_model":  # the written SavedModel against the restored network
            return check_parity(path, SavedModelRunner(PolicyModule(network)), env, steps=steps)
        with tempfile.TemporaryDirectory(prefix="export-check-") as tmp:
            reference = export_policy(network, os.path.join(tmp, "reference"))
            return check_parity(reference, open_runner(path), env, steps=steps)
    finally:
        env.close()


def _damaged_checkpoints(error: ValueError) -> None:
    """Ends the program (exit code 1) when ``error`` says no checkpoint of the run reads back
    whole (``checkpointing.intact_checkpoint``): damaged files, not a bad flag."""
    if "no intact checkpoint in" in str(error):
        fault(f"--{error}")


@reports_flag_errors
def main(argv) -> None:
    del argv
    fmt = FLAGS.format
    output = check_flags(
        FLAGS.logdir, FLAGS.output, FLAGS.overwrite, fmt, FLAGS.check, FLAGS.check_steps
    )
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.export import export_onnx, export_policy, export_tflite
    from tfagents_vtrace.runtime.rundir.checkpointing import restore_network
    from tfagents_vtrace.runtime.rundir.config_io import read_config, read_env_id, read_env_kwargs

    if FLAGS.env:  # the run's own environment: module:Env-v0 imports what it names
        from tfagents_vtrace.envs.user_envs import resolve_env

        try:
            named = resolve_env(FLAGS.env)
        except ValueError as e:
            raise FlagError("env", str(e).partition(": ")[2]) from None
    with flag_error_from("logdir", ValueError):  # config.json is data: a registered env id
        config = read_config(FLAGS.logdir)
    if FLAGS.env and config.get("env_id") != named:
        raise FlagError("env", f"{FLAGS.env} is not the run's environment {config['env_id']!r}")
    with flag_error_from("logdir", ValueError):
        env_id = read_env_id(config, FLAGS.logdir)
        env_kwargs = read_env_kwargs(config, env_id)
        agent_name = config.get("agent", "impala")
        agent = get_agent(agent_name)
    if agent.export_run is not None:  # agents whose policy is not the actor-critic network
        formats = agent.export_formats
        if fmt not in formats:
            raise FlagError("format", f"{agent_name} runs export {', '.join(formats)} only")
        if FLAGS.check and agent.check_export is None:
            raise FlagError("check", f"{agent_name} runs have no parity check")
        try:
            path = agent.export_run(FLAGS.logdir, output, overwrite=FLAGS.overwrite, fmt=fmt)
        except ValueError as e:
            _damaged_checkpoints(e)
            raise
        print(path, flush=True)
        if FLAGS.check:
            _report(agent.check_export(FLAGS.logdir, path, fmt=fmt, steps=FLAGS.check_steps))
        return
    try:
        network = restore_network(FLAGS.logdir)
    except ValueError as e:
        _damaged_checkpoints(e)
        raise
    write = {"saved_model": export_policy, "tflite": export_tflite, "onnx": export_onnx}[fmt]
    path = write(network, output, overwrite=FLAGS.overwrite)
    print(path, flush=True)
    if FLAGS.check:
        _report(parity_check(network, path, fmt, env_id, FLAGS.check_steps, env_kwargs))


def _report(report) -> None:
    """Prints the parity report as one JSON line; exit code 1 when it failed."""
    print(report.to_json(), flush=True)
    if not report.passed:
        print(f"error: parity check failed: {'; '.join(report.failures)}", file=sys.stderr)
        raise SystemExit(1)


def entry_point() -> None:
    """The ``tfv-export`` command (``python -m experiments.export`` in a clone)."""
    define_flags()
    run(main, command=sys.modules[__name__])


if __name__ == "__main__":
    entry_point()
