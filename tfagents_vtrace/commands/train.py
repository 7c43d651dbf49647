"""Train an agent: ``tfv-train --agent=impala --env=CartPole-v1 --logdir=DIR``.

Writes the run directory (docs/design.md, "The run directory": config.json, checkpoints/,
metrics.jsonl, TensorBoard events, policy/) and ends by printing one JSON line with
``"final": true``, the step count, the wall time since process start (imports included) and
the greedy evaluation return.
Training into an existing run directory resumes from its last checkpoint; a directory holding
other files, or a run of another agent, env or network, is refused unless ``--overwrite``. A
run that already ended is not trained again. While it runs, the trainer holds an exclusive
lock on the directory (``DIR/.lock``, ``runtime.run_lock``): a second trainer on the same
``--logdir`` ends with one line naming the holder's pid (exit code 2). Ctrl-C or SIGTERM
writes a checkpoint first (exit code 130); the same command then resumes. Bad flag values end
with a one-line error naming the flag (exit code 2). Every other end is one line too, with
exit code 1: a failing environment, a full disk, damaged checkpoints, a non-finite loss,
memory running out (each naming what to do), or any other exception (its type and message;
``TFV_TRACEBACK=1`` in the environment shows its traceback instead). Ctrl-C while the command
starts (before anything is written, or before training) is one line and exit code 130.

``--config=NAME`` reads a shipped config (``tfagents_vtrace/configs/NAME.cfg``, e.g.
``impala_cartpole``; a name never leaves that folder) or a ``.cfg`` flagfile's path
(``tfagents_vtrace.api.config_path``), as ``--flagfile=PATH`` at its place: later flags
override it. A positional argument (``total_steps=5``, a missing ``--``) is refused in one
line naming it (exit code 2), as absl would otherwise drop it. The flags' defaults are those
of the agent named on the command line or in its flagfiles, so they are declared at import,
after the command line's ``--config`` is expanded.
"""

import time

START_TIME = time.time()  # before the heavy imports: wall_time counts what a user waits

import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402


def _interrupted_while_importing(signum, frame) -> None:
    """Ctrl-C while the modules load (TensorFlow takes seconds): one line and exit code 130,
    not a traceback through the import machinery. Nothing was written yet; :func:`main`
    puts Python's own handler back once the imports are done."""
    os.write(2, b"interrupted while starting; nothing was written: run the command again\n")
    os._exit(130)


# Only when this module is the program (tfv-train, python -m ...train), not a library's import,
# and not when SIGINT is ignored (nohup, a background job).
if os.path.basename(sys.argv[0] if sys.argv else "") in ("tfv-train", "train.py") and (
    signal.getsignal(signal.SIGINT) is signal.default_int_handler
):
    signal.signal(signal.SIGINT, _interrupted_while_importing)

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags, logging  # noqa: E402

from tfagents_vtrace.commands import cli, common, config_flags  # noqa: E402

FLAGS = flags.FLAGS


def _import_tensorflow() -> None:
    """Imports TensorFlow with Keras's optional imports hidden. When installed, Keras imports at
    import time ``matplotlib.pyplot`` (an image-gallery helper), ``pandas`` (DataFrame input
    to ``Model.fit``) and ``cv2`` (bounding-box drawing); training uses none of them, and they
    cost a noticeable part of every run's start (docs/results/implementation_choices.md;
    pandas comes with the ``test`` and ``bench`` extras). Keras then treats them as not
    installed; later imports of these packages in this process work as usual."""
    optional = ("matplotlib", "matplotlib.pyplot", "pandas", "cv2")
    hidden = [name for name in optional if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # makes `import matplotlib...` raise ImportError
    try:
        import tensorflow  # noqa: F401
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


# --config=NAME becomes --flagfile=PATH before the agent is read from the flagfiles, and
# deprecated flag names their names now; a name that is no config, or an old name given
# beside its new one, is reported by entry_point().
_ARGV, _CONFIG_ERROR = common.expand_config(sys.argv)
_ARGV, _RENAME_ERROR = common.rename_deprecated_flags(_ARGV)
sys.argv[:] = _ARGV
_import_tensorflow()  # the config classes behind the flags import it
# Flag defaults are the chosen agent's (``--agent=a2c --help`` shows A2C's).
AGENT = config_flags.agent_from_argv(sys.argv)
common.define_train_flags(AGENT)
flags.mark_flag_as_required("logdir")
for _module in (common, config_flags):  # absl's --helpshort lists them too
    flags.adopt_module_key_flags(_module)


def _fault(error: BaseException) -> None:
    """:func:`~tfagents_vtrace.commands.common.fault_message` on stderr and exit code 1;
    with ``TFV_TRACEBACK=1`` in the environment the exception propagates (its traceback)."""
    if os.environ.get("TFV_TRACEBACK", "") not in ("", "0"):
        raise error
    cli.fault(common.fault_message(error))


def _interrupted(logdir: str | None) -> None:
    """A Ctrl-C that reached the command (during start-up, or a second one during the run,
    which stops at once): one line and exit code 130."""
    from tfagents_vtrace.runtime.rundir.checkpointing import has_checkpoint

    sys.stdout.flush()
    if logdir and os.path.isdir(logdir) and has_checkpoint(logdir):
        message = f"interrupted; {logdir} keeps its last checkpoint: run the same command to resume"
    else:
        message = "interrupted while starting; nothing was trained: run the same command to start"
    print(message, file=sys.stderr, flush=True)
    sys.exit(130)


def _names_a_flag(message: str) -> bool:
    """Whether ``message`` is ``"name: ..."`` of a flag (a bad value or run directory)."""
    name, sep, _ = message.partition(": ")
    return bool(sep) and (name in FLAGS or name == "env_id")


@cli.reports_flag_errors
def main(argv) -> None:
    del argv
    if signal.getsignal(signal.SIGINT) is _interrupted_while_importing:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # KeyboardInterrupt from here
    common.check_config_flag()
    try:
        configs = _configs()
    except KeyboardInterrupt:
        _interrupted(None)
    try:
        final = _run(configs)
    except KeyboardInterrupt:
        _interrupted(FLAGS.logdir)
    if final.get("already_finished"):
        print(
            f"{FLAGS.logdir}: this run already ended at step {final['step']}; nothing to do "
            "(raise --total_steps to train on, or use another --logdir).",
            file=sys.stderr,
            flush=True,
        )
    from tfagents_vtrace.runtime.rundir import config_io

    print(config_io.dumps(final), flush=True)  # strict JSON: null for NaN / inf


def _configs():
    """The run's configs from the flags; a bad value ends with one line naming its flag
    (exit code 2), a fault of the environment's own code (its module, its constructor) with
    one line (exit code 1)."""
    if FLAGS.num_cpu_devices:
        from tfagents_vtrace.runtime.strategy import configure_cpu_devices

        configure_cpu_devices(FLAGS.num_cpu_devices)
    import gymnasium

    from tfagents_vtrace.envs.user_envs import resolve_env
    from tfagents_vtrace.settings import check_spaces

    try:
        FLAGS.env = resolve_env(FLAGS.env, "--env")  # module:Env-v0 imports what it names
        configs = common.configs_from_flags()
        check_spaces(FLAGS.agent, configs.run_config)  # before any network is built
    except cli.FlagError:
        raise
    except gymnasium.error.Error as e:
        cli.fail(f"--env: {FLAGS.env}: {e}")
    except ValueError as e:  # a flag's value, an env/agent pair
        cli.fail(cli.as_flag_message(str(e)))
    except Exception as e:  # noqa: BLE001 - the environment's own code failed
        _fault(e)
    return configs


def _run(configs) -> dict:
    """Trains ``configs`` into ``--logdir`` (``runtime.run.run``); every exception that ends
    the run becomes one line: a stop (Ctrl-C, SIGTERM: exit code 130, checkpointed), a refused
    run directory or setting (exit code 2), a fault (exit code 1: a failing environment, a
    full disk, damaged checkpoints, a non-finite loss, memory running out, anything else)."""
    import gymnasium

    from tfagents_vtrace.envs.failures import ActingError
    from tfagents_vtrace.runtime.run import run
    from tfagents_vtrace.runtime.rundir import stop_signals
    from tfagents_vtrace.runtime.rundir.checkpointing import CheckpointError
    from tfagents_vtrace.runtime.rundir.write_errors import WriteError

    try:
        return run(
            configs,
            FLAGS.logdir,
            strategy=FLAGS.strategy,
            overwrite=FLAGS.overwrite,
            start_time=START_TIME,
        )
    except stop_signals.RunInterrupted as e:
        print(f"{e}; run the same command to resume.", file=sys.stderr, flush=True)
        sys.exit(130)
    except (ActingError, WriteError, CheckpointError) as e:  # a failing env, a full disk, no
        cli.fault(f"{common.first_line(e, None)}{common.notes(e)}")  # intact checkpoint
    except gymnasium.error.Error as e:
        cli.fail(f"--env: {FLAGS.env}: {e}")
    except ValueError as e:  # a refused run directory or setting; else a fault
        if not _names_a_flag(str(e)):
            _fault(e)
        cli.fail(cli.as_flag_message(str(e).replace("env_id: ", "env: ", 1)))
    except Exception as e:  # noqa: BLE001 - NonFiniteLossError, MemoryError, any other fault
        _fault(e)


def entry_point() -> None:
    """The ``tfv-train`` command (``python -m experiments.train`` in a clone)."""
    if _CONFIG_ERROR or _RENAME_ERROR:
        cli.fail(_CONFIG_ERROR or _RENAME_ERROR)
    logging.set_verbosity(logging.WARNING)
    cli.run(
        main,
        command=sys.modules[__name__],
        short_help=lambda: common.help_text(AGENT, __doc__),
    )


if __name__ == "__main__":
    entry_point()
