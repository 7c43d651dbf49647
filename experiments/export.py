"""Export a trained policy: ``python -m experiments.export --logdir=DIR --output=PATH``.

Rebuilds the network from ``DIR/config.json`` (or, for agents with an ``export_run``, such as
TAAC, lets the agent rebuild its policy), restores the latest checkpoint in
``DIR/checkpoints`` and writes the SavedModel of DESIGN.md's export contract to PATH
(Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561, is the agent family).
The SavedModel is written beside PATH and renamed into place: ``--overwrite`` replaces only
a SavedModel, never a file or another non-empty directory, and a failed export keeps the
previous one. A run directory without config or checkpoint, or whose env id is not a
registered gymnasium id (``config.json`` is data: a ``module:`` prefix, which gymnasium would
import, is refused), or a PATH that may not be written, ends with one line on stderr and exit
code 2 (``experiments.cli``).
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

from experiments.cli import FlagError, flag_error_from, reports_flag_errors  # noqa: E402

FLAGS = flags.FLAGS


def define_flags() -> None:
    """Declares the flags of this entry point."""
    flags.DEFINE_string("logdir", None, "Run directory (config.json + checkpoints/).")
    flags.DEFINE_string("output", None, "Where to write the SavedModel (default: LOGDIR/policy).")
    flags.DEFINE_bool(
        "overwrite", False, "Replace an existing SavedModel at --output (nothing else is replaced)."
    )
    flags.mark_flag_as_required("logdir")


def check_flags(logdir: str, output: str | None, overwrite: bool) -> str:
    """Checks the run directory and the output path before TensorFlow loads; returns the
    output path (``LOGDIR/policy`` when ``output`` is None).

    Raises:
      FlagError: ``logdir`` is not a directory or lacks ``config.json`` or a checkpoint
        (``checkpointing.has_checkpoint``); ``output`` is a file, a symbolic link or a non-empty
        directory that is not a SavedModel (even with ``overwrite``: export replaces only a
        SavedModel); or ``output`` is a SavedModel and ``overwrite`` is False.
    """
    if not os.path.isdir(logdir):
        raise FlagError("logdir", f"no such directory: {logdir}")
    if not os.path.isfile(os.path.join(logdir, "config.json")):
        raise FlagError("logdir", f"no config.json in {logdir} (not an experiments.train run)")
    from tfagents_vtrace.runtime.checkpointing import has_checkpoint  # no TensorFlow import

    if not has_checkpoint(logdir):
        raise FlagError("logdir", f"no checkpoint in {os.path.join(logdir, 'checkpoints')}")
    output = output or os.path.join(logdir, "policy")
    from tfagents_vtrace.export_target import check_export_path  # no TensorFlow import

    try:  # a file, a link or a non-empty non-SavedModel: refused even with --overwrite
        check_export_path(output, overwrite=True, name="output")
    except ValueError as e:
        message = str(e).split(": ", 1)[1]  # "output: ..." -> "--output: ..."
        raise FlagError("output", message.replace("with overwrite", "with --overwrite")) from None
    if os.path.isdir(output) and os.listdir(output) and not overwrite:
        message = f"{output} exists and is not empty; pass --overwrite to replace it"
        raise FlagError("output", message)
    return output


@reports_flag_errors
def main(argv) -> None:
    del argv
    output = check_flags(FLAGS.logdir, FLAGS.output, FLAGS.overwrite)
    from tfagents_vtrace.agents import get_agent
    from tfagents_vtrace.export import export_policy
    from tfagents_vtrace.runtime.checkpointing import restore_network
    from tfagents_vtrace.runtime.config_io import read_config, read_env_id

    with flag_error_from("logdir", ValueError):  # config.json is data: a registered env id
        config = read_config(FLAGS.logdir)
        read_env_id(config, FLAGS.logdir)
        agent = get_agent(config.get("agent", "impala"))
    if hasattr(agent, "export_run"):  # agents whose policy is not the actor-critic network
        path = agent.export_run(FLAGS.logdir, output, overwrite=FLAGS.overwrite)
    else:
        network = restore_network(FLAGS.logdir)
        path = export_policy(network, output, overwrite=FLAGS.overwrite)
    print(path, flush=True)


if __name__ == "__main__":
    define_flags()
    app.run(main)
