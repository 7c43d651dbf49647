"""``python -m experiments.plot``: the ``tfv-plot`` command, run from the clone."""

from tfagents_vtrace.commands.plot import entry_point

if __name__ == "__main__":
    entry_point()
