"""``python -m experiments.export``: the ``tfv-export`` command, run from the clone."""

from tfagents_vtrace.commands.export import entry_point

if __name__ == "__main__":
    entry_point()
