"""``python -m experiments.evaluate``: the ``tfv-evaluate`` command, run from the clone."""

from tfagents_vtrace.commands.evaluate import entry_point

if __name__ == "__main__":
    entry_point()
