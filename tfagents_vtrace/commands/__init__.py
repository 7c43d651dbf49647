"""The command-line programs, installed as console scripts with the package.

``tfv-train``, ``tfv-evaluate``, ``tfv-export``, ``tfv-plot`` and ``tfv-benchmark`` run the
``entry_point()`` of :mod:`.train`, :mod:`.evaluate`, :mod:`.export`, :mod:`.plot` and
:mod:`.benchmark` (in a clone, ``python -m experiments.<name>`` runs the same function).

Importing this package (which every command does before its own imports) limits numpy's
OpenBLAS to one thread unless ``OPENBLAS_NUM_THREADS`` is set: the numpy acting policies
multiply small matrices, and OpenBLAS's spinning worker threads on a busy 2-core machine
turned a 0.1 ms policy step into 50 ms at the 90th percentile (16 MinAtar grids through a
256x256 MLP, measured with a training run beside it).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
