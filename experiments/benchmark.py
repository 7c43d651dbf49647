"""``python -m experiments.benchmark`` runs the ``tfv-benchmark`` command.

Imported, this module is :mod:`tfagents_vtrace.commands.benchmark` (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import benchmark as _command

if __name__ == "__main__":
    _command.entry_point()
else:
    sys.modules[__name__] = _command
