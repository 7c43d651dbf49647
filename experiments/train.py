"""``python -m experiments.train``: the ``tfv-train`` command, run from the clone."""

from tfagents_vtrace.commands.train import entry_point

if __name__ == "__main__":
    entry_point()
