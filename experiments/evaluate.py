"""``python -m experiments.evaluate`` runs the ``tfv-evaluate`` command.

Imported, this module is :mod:`tfagents_vtrace.commands.evaluate` (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import evaluate as _command

if __name__ == "__main__":
    _command.entry_point()
else:
    sys.modules[__name__] = _command
