"""``python -m experiments.benchmark``: the ``tfv-benchmark`` command, run from the clone."""

from tfagents_vtrace.commands.benchmark import entry_point

if __name__ == "__main__":
    entry_point()
