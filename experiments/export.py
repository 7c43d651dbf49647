"""Export a trained policy: ``python -m experiments.export --logdir=DIR --output=PATH``.

Rebuilds the network from ``DIR/config.json``, restores the latest checkpoint in
``DIR/checkpoints`` and writes the SavedModel of DESIGN.md's export contract to PATH.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from absl import app, flags  # noqa: E402

flags.DEFINE_string("logdir", None, "Run directory (config.json + checkpoints/).")
flags.DEFINE_string("output", None, "Where to write the SavedModel (default: LOGDIR/policy).")
flags.DEFINE_bool("overwrite", False, "Replace an existing non-empty output directory.")
flags.mark_flag_as_required("logdir")
FLAGS = flags.FLAGS


def main(argv) -> None:
    del argv
    from tfagents_vtrace.export import export_policy
    from tfagents_vtrace.runtime.run_dir import restore_network

    network = restore_network(FLAGS.logdir)
    output = FLAGS.output or os.path.join(FLAGS.logdir, "policy")
    path = export_policy(network, output, overwrite=FLAGS.overwrite)
    print(path, flush=True)


if __name__ == "__main__":
    app.run(main)
