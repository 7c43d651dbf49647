"""``experiments.cli`` is :mod:`tfagents_vtrace.commands.cli`.

Imported, this module is that one (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import cli as _module

sys.modules[__name__] = _module
