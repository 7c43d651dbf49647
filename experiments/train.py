"""Train an agent: ``python -m experiments.train --agent=impala --env=CartPole-v1 --logdir=DIR``.

Writes the run directory of DESIGN.md (config.json, checkpoints/, metrics.jsonl, TensorBoard
events, policy/) and ends by printing one JSON line with ``"final": true``, the step count,
the wall time since process start (imports included) and the greedy evaluation return.
Training into an existing run directory resumes from its last checkpoint; a directory holding
other files, or a run of another agent, env or network, is refused unless ``--overwrite``. A
run that already ended is not trained again. While it runs, the trainer holds an exclusive
lock on the directory (``DIR/.lock``, ``runtime.run_lock``): a second trainer on the same
``--logdir`` ends with one line naming the holder's pid (exit code 2). Ctrl-C or SIGTERM
writes a checkpoint first (exit code 130); the same command then resumes. Bad flag values end
with a one-line error naming the flag (exit code 2).
"""

import time

START_TIME = time.time()  # before the heavy imports: wall_time counts what a user waits

import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import flags, logging  # noqa: E402

from experiments import cli, common, config_flags  # noqa: E402

FLAGS = flags.FLAGS


def _import_tensorflow() -> None:
    """Imports TensorFlow with Keras's optional imports hidden. When installed, Keras imports at
    import time ``matplotlib.pyplot`` (an image-gallery helper), ``pandas`` (DataFrame input
    to ``Model.fit``) and ``cv2`` (bounding-box drawing); training uses none of them, and on
    the 2-core reference machine they cost about 0.6 s, 0.4 s and 0.03 s of every run's start
    (pandas comes with the ``test`` and ``bench`` extras). Keras then treats them as not
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


_import_tensorflow()  # the config classes behind the flags import it
# Flag defaults are the chosen agent's (``--agent=a2c --help`` shows A2C's).
common.define_train_flags(config_flags.agent_from_argv(sys.argv))
flags.mark_flag_as_required("logdir")
for _module in (common, config_flags):  # --help lists them, not only --helpfull
    flags.adopt_module_key_flags(_module)


def main(argv) -> None:
    del argv
    if FLAGS.num_cpu_devices:
        from tfagents_vtrace.runtime.strategy import configure_cpu_devices

        configure_cpu_devices(FLAGS.num_cpu_devices)
    import gymnasium

    import tfagents_vtrace.envs  # noqa: F401 - registers the project's env ids
    from tfagents_vtrace.runtime import config_io, run_dir, stop_signals
    from tfagents_vtrace.runtime.driver import train
    from tfagents_vtrace.runtime.env_failures import ActingError
    from tfagents_vtrace.runtime.run_lock import RunLock
    from tfagents_vtrace.runtime.strategy import make_strategy, worker_role

    def stop(signum, frame) -> None:  # the loops stop between two steps and save
        if stop_signals.stop_requested():
            raise KeyboardInterrupt  # a second Ctrl-C: stop at once
        stop_signals.request_stop()

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)  # a cluster's preemption saves like Ctrl-C

    lock = RunLock(FLAGS.logdir)  # held until the process ends (the kernel then releases it)

    def fail(message: str) -> None:  # a refused or failed start leaves no lock file behind
        lock.release(discard=True)
        cli.fail(message)

    try:
        agent, agent_config, network_config, run_config = common.configs_from_flags()
        strategy = make_strategy(FLAGS.strategy)
        config = config_io.run_config_dict(FLAGS.agent, run_config, agent_config, network_config)
        if worker_role(strategy).is_chief:  # the others write elsewhere (multi_worker)
            lock.acquire()  # before anything in the directory is checked or written
            run_dir.prepare_logdir(FLAGS.logdir, config, overwrite=FLAGS.overwrite)
    except cli.FlagError as e:  # e.g. a flag of another agent
        fail(str(e))
    except ValueError as e:  # the configs' validation names the field (= the flag)
        fail(str(e))
    except gymnasium.error.Error as e:
        fail(f"--env: {FLAGS.env}: {e}")
    kwargs = dict(strategy=strategy, start_time=START_TIME, agent_name=FLAGS.agent)
    try:  # the run driver, whatever the agent
        final = train(run_config, agent, agent_config, network_config, FLAGS.logdir, **kwargs)
    except stop_signals.RunInterrupted as e:
        print(f"{e}; run the same command to resume.", file=sys.stderr, flush=True)
        sys.exit(130)
    except gymnasium.error.Error as e:
        fail(f"--env: {FLAGS.env}: {e}")
    except ActingError as e:  # an env failing again and again, a policy gone non-finite
        print(f"error: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
    if final.get("already_finished"):
        print(
            f"{FLAGS.logdir}: this run already ended at step {final['step']}; nothing to do "
            "(raise --total_steps to train on, or use another --logdir).",
            file=sys.stderr,
            flush=True,
        )
    print(config_io.dumps(final), flush=True)  # strict JSON: null for NaN / inf


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    cli.run(main)
