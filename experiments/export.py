"""``python -m experiments.export`` runs the ``tfv-export`` command.

Imported, this module is :mod:`tfagents_vtrace.commands.export` (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import export as _command

if __name__ == "__main__":
    _command.entry_point()
else:
    sys.modules[__name__] = _command
