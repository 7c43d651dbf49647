"""Run a benchmark: ``python -m experiments.benchmark --name=ops_bench [-- --samples=40]``.

The benchmarks live in ``benchmarks/`` as scripts with their own arguments (``--help`` on
each); this entry point lists them (``--list``) and runs one by name in a fresh interpreter,
passing everything after ``--`` through, so its table prints here and its exit code is ours.
A benchmark is a script with a ``__main__`` block (helper modules such as ``baselines.py``
are not listed). A missing or unknown ``--name`` ends with one line on stderr and exit
code 2 (``experiments.cli``).
"""

import os
import subprocess
import sys

from absl import flags

from experiments.cli import FlagError, reports_flag_errors, run

FLAGS = flags.FLAGS
BENCH_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")

flags.DEFINE_string("name", None, "Benchmark script under benchmarks/, without .py.")
flags.DEFINE_bool("list", False, "List the benchmarks with their first docstring line.")


def available() -> dict[str, str]:
    """Benchmark name -> first line of its module docstring (runnable scripts only)."""
    out = {}
    for entry in sorted(os.listdir(BENCH_DIR)):
        if entry.endswith(".py") and not entry.startswith("_"):
            with open(os.path.join(BENCH_DIR, entry)) as f:
                text = f.read()
            if '\nif __name__ == "__main__":' not in text:
                continue  # a helper module imported by the benchmarks
            first = text.split('"""', 2)[1].strip().splitlines()[0] if '"""' in text else ""
            out[entry[:-3]] = first
    return out


@reports_flag_errors
def main(argv) -> None:
    names = available()
    if FLAGS.list or FLAGS.name is None:
        for name, line in names.items():
            print(f"{name:16s} {line}")
        if FLAGS.name is None and not FLAGS.list:
            raise FlagError("name", "expected one of the benchmarks listed above")
        return
    if FLAGS.name not in names:
        raise FlagError("name", f"expected one of {sorted(names)}, received {FLAGS.name!r}")
    script = os.path.join(BENCH_DIR, FLAGS.name + ".py")
    sys.exit(subprocess.call([sys.executable, script, *argv[1:]]))


if __name__ == "__main__":
    run(main)
