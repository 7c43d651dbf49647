"""``python -m experiments.plot`` runs the ``tfv-plot`` command.

Imported, this module is :mod:`tfagents_vtrace.commands.plot` (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import plot as _command

if __name__ == "__main__":
    _command.entry_point()
else:
    sys.modules[__name__] = _command
