"""The command-line programs, installed as console scripts with the package.

``tfv-train``, ``tfv-evaluate``, ``tfv-export``, ``tfv-plot`` and ``tfv-benchmark`` run the
``entry_point()`` of :mod:`.train`, :mod:`.evaluate`, :mod:`.export`, :mod:`.plot` and
:mod:`.benchmark` (in a clone, ``python -m experiments.<name>`` runs the same function).

Importing this package (which every command does before its own imports) limits numpy's
OpenBLAS to one thread unless ``OPENBLAS_NUM_THREADS`` is set: the numpy acting policies
multiply small matrices, and on a busy machine OpenBLAS's spinning worker threads make such a
policy step many times slower at its tail (docs/results/implementation_choices.md).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
