"""``experiments.common`` is :mod:`tfagents_vtrace.commands.common`.

Imported, this module is that one (see :mod:`experiments`).
"""

import sys

from tfagents_vtrace.commands import common as _module

sys.modules[__name__] = _module
