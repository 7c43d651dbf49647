"""Export a trained policy: ``tfv-export --logdir=DIR --output=PATH``.

``--format=saved_model|tflite|onnx [--check]``.

The run's agent rebuilds its policy (``AgentSpec.restore_policy``: the network or, for TAAC,
the learner from ``DIR/config.json`` with the latest checkpoint in ``DIR/checkpoints``), and
:mod:`tfagents_vtrace.export.artefacts` writes it to PATH: the SavedModel of the policy-module
contract (:mod:`tfagents_vtrace.export.policy_module`; Espeholt et al., "IMPALA", 2018,
https://arxiv.org/abs/1802.01561, is the agent family), or with ``--format=tflite`` /
``--format=onnx`` one LiteRT / ONNX file (:mod:`tfagents_vtrace.export.litert`,
:mod:`tfagents_vtrace.export.onnx`; the ``litert`` / ``onnx`` extras run them). The artefact
is written beside PATH and renamed into place: ``--overwrite`` replaces only an artefact of
the same format (a SavedModel directory, a LiteRT or ONNX model file), never another file or
non-empty directory, and a failed export keeps the previous one.

``--check`` then runs the trajectory parity check of :mod:`tfagents_vtrace.export.parity`: a
SavedModel of the same weights acts ``--check_steps`` steps in the run's env (episodes cut
so that resets fall inside the window), the artefact replays the same inputs and noise, and
greedy and sampled actions must be identical and every float output within
``1e-5 + 1e-6 * |reference|``. A SavedModel is checked against the restored policy in
process, a file against a SavedModel of the policy it was traced from (for TAAC, its
``greedy_action`` with ``epsilon_greedy=0``, as the file's). One JSON line reports the max
abs differences; a failed check exits with code 1.

A run whose network has a torso or core of one's own (``config.json`` names its import path)
needs ``--torso=package.module:Name`` / ``--core=...`` naming the same one: the module is
imported because the flag names it, never because the run directory does.

A run directory without config or checkpoint, or whose env id is not a registered gymnasium
id (``config.json`` is data: a ``module:`` prefix, which gymnasium would import, is refused),
a PATH that may not be written, or a format whose extra is not installed, ends with one line
on stderr and exit code 2 (``commands.cli``). A run whose checkpoints are all damaged (none
reads back whole) ends with one line naming them and exit code 1.
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
from tfagents_vtrace.export.target import FORMATS, check_target  # noqa: E402 - no TensorFlow

FLAGS = flags.FLAGS


def define_flags() -> None:
    """Declares the flags of this entry point."""
    flags.DEFINE_string("logdir", None, "Run directory (config.json + checkpoints/).")
    flags.DEFINE_string(
        "env",
        None,
        "The run's environment when it is your own: 'package.module:Env-v0' imports the "
        "module that registers it (an id read from config.json never imports code).",
    )
    for name, what in (("torso", "torso"), ("core", "recurrent core")):
        flags.DEFINE_string(
            name,
            None,
            f"The run's {what} when it is a layer of your own: 'package.module:Name' imports "
            "the module (config.json names it but never imports code); required for such a run.",
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
        list(FORMATS),
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
        "(tfagents_vtrace.export.parity); exit code 1 when it fails.",
    )
    flags.DEFINE_integer("check_steps", 300, "Environment steps of the --check window.")
    flags.mark_flag_as_required("logdir")


def _check_extras(fmt: str, check: bool) -> None:
    """FlagError naming ``--format`` (or ``--check``) when a module the format needs is absent."""
    need = FORMATS[fmt]
    uses = [("format", "export", need.write_modules), ("check", "runs", need.run_modules)]
    for flag, use, modules in uses[: 2 if check else 1]:
        missing = [m for m in modules if importlib.util.find_spec(m) is None]
        if missing:
            install = f"pip install 'tfagents_vtrace[{need.extra}]'"
            raise FlagError(flag, f"{fmt} {use} needs {', '.join(missing)}: {install}")


def _check_output(output: str, fmt: str, overwrite: bool) -> None:
    try:  # a file, a link or a non-empty non-artefact: refused even with --overwrite
        check_target(output, fmt, overwrite=True, name="output")
    except ValueError as e:
        message = str(e).split(": ", 1)[1]  # "output: ..." -> "--output: ..."
        raise FlagError("output", message.replace("with overwrite", "with --overwrite")) from None
    if FORMATS[fmt].is_file:
        exists = os.path.isfile(output) and os.path.getsize(output) > 0
    else:
        exists = os.path.isdir(output) and os.listdir(output)
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
    output = output or os.path.join(logdir, FORMATS[fmt].default_name)
    _check_output(output, fmt, overwrite)
    return output


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
    from tfagents_vtrace.export import artefacts
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
    _own_layers(config)
    with flag_error_from("logdir", ValueError):
        env_id = read_env_id(config, FLAGS.logdir)
        env_kwargs = read_env_kwargs(config, env_id)
        agent = get_agent(config.get("agent", "impala"))
    try:
        policy = agent.restore_policy(FLAGS.logdir)
    except ValueError as e:
        _damaged_checkpoints(e)
        raise
    path = artefacts.write(policy, output, fmt, overwrite=FLAGS.overwrite)
    print(path, flush=True)
    if FLAGS.check:
        from tfagents_vtrace.envs import make_env

        env = make_env(env_id, **env_kwargs)
        try:
            _report(artefacts.check(policy, path, fmt, env, steps=FLAGS.check_steps))
        finally:
            env.close()


def _own_layers(config: dict) -> None:
    """Resolves ``--torso`` / ``--core`` (their modules imported: the user named them) and
    checks them against the run's ``config.json``; FlagError naming the flag when the run's
    network names a layer of one's own that the flag does not give, or the flag names
    another one."""
    from tfagents_vtrace.networks import user_layers

    network = config.get("network_config") or {}
    for name in user_layers.KINDS:
        given, recorded = FLAGS[name].value, network.get(name)
        if given:
            try:
                given = user_layers.resolve(given, name)
            except ValueError as e:
                raise FlagError(name, str(e).partition(": ")[2]) from None
            if given != recorded:
                raise FlagError(name, f"{given} is not the run's {name} {recorded!r}")
        elif user_layers.is_user_path(recorded):
            raise FlagError(
                name,
                f"the run's network uses {recorded!r}, a layer of your own, and a run directory "
                f"never imports code: pass --{name}={recorded}",
            )


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
