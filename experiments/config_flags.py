"""``experiments.config_flags`` is :mod:`tfagents_vtrace.commands.config_flags`.

Imported, this module is that one (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import config_flags as _module

sys.modules[__name__] = _module
