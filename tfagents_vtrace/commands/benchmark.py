"""Run a benchmark: ``tfv-benchmark --name=ops_bench [-- --samples=40]``.

The benchmarks live in ``benchmarks/`` as scripts with their own arguments (``--help`` on
each); this entry point lists them (``--list``) and runs one by name in a fresh interpreter,
passing everything after ``--`` through, so its table prints here and its exit code is ours.
A benchmark is a script with a ``__main__`` block (helper modules such as ``baselines.py``
are not listed). A missing or unknown ``--name`` ends with one line on stderr and exit
code 2 (:mod:`tfagents_vtrace.commands.cli`).

The scripts come with the source tree, not with the installed package: ``--dir`` defaults to
the ``benchmarks/`` of the clone this package runs from, else to ``./benchmarks``.
"""

import os
import subprocess
import sys

from absl import flags

from tfagents_vtrace.commands.cli import FlagError, reports_flag_errors, run

FLAGS = flags.FLAGS


def _source_benchmarks() -> str:
    """``benchmarks/`` of the source tree holding this package (a clone, an editable
    install), else ``benchmarks`` under the working directory."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    bench_dir = os.path.join(root, "benchmarks")
    if os.path.isfile(os.path.join(root, "setup.cfg")) and os.path.isdir(bench_dir):
        return bench_dir
    return "benchmarks"


BENCH_DIR = _source_benchmarks()

flags.DEFINE_string("name", None, "Benchmark script under --dir, without .py.")
flags.DEFINE_bool("list", False, "List the benchmarks with their first docstring line.")
flags.DEFINE_string(
    "dir", BENCH_DIR, "The benchmarks/ directory of a clone (the package does not ship it)."
)


def available(bench_dir: str = BENCH_DIR) -> dict[str, str]:
    """Benchmark name -> first line of its module docstring (runnable scripts only)."""
    out = {}
    for entry in sorted(os.listdir(bench_dir)):
        if entry.endswith(".py") and not entry.startswith("_"):
            with open(os.path.join(bench_dir, entry)) as f:
                text = f.read()
            if '\nif __name__ == "__main__":' not in text:
                continue  # a helper module imported by the benchmarks
            first = text.split('"""', 2)[1].strip().splitlines()[0] if '"""' in text else ""
            out[entry[:-3]] = first
    return out


@reports_flag_errors
def main(argv) -> None:
    if not os.path.isdir(FLAGS.dir):
        raise FlagError(
            "dir",
            f"no directory {FLAGS.dir!r}: the benchmarks come with the source tree "
            "(git clone), not with the installed package",
        )
    names = available(FLAGS.dir)
    if FLAGS.list or FLAGS.name is None:
        for name, line in names.items():
            print(f"{name:16s} {line}")
        if FLAGS.name is None and not FLAGS.list:
            raise FlagError("name", "expected one of the benchmarks listed above")
        return
    if FLAGS.name not in names:
        raise FlagError("name", f"expected one of {sorted(names)}, received {FLAGS.name!r}")
    script = os.path.join(FLAGS.dir, FLAGS.name + ".py")
    sys.exit(subprocess.call([sys.executable, script, *argv[1:]]))


def entry_point() -> None:
    """The ``tfv-benchmark`` command (``python -m experiments.benchmark`` in a clone)."""
    run(main, command=sys.modules[__name__], passthrough=True)


if __name__ == "__main__":
    entry_point()
