"""``python -m experiments.train`` runs the ``tfv-train`` command.

Imported, this module is :mod:`tfagents_vtrace.commands.train` (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import train as _command

if __name__ == "__main__":
    _command.entry_point()
else:
    sys.modules[__name__] = _command
