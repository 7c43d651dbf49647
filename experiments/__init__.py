"""The experiments, run from a clone: ``python -m experiments.train`` and its siblings.

Each module here runs one command of :mod:`tfagents_vtrace.commands` from the clone's own
code; it is the same ``entry_point()`` as the console script that ``pip install`` puts on
``PATH``:

==================================  ================
in a clone                          installed
==================================  ================
``python -m experiments.train``     ``tfv-train``
``python -m experiments.evaluate``  ``tfv-evaluate``
``python -m experiments.export``    ``tfv-export``
``python -m experiments.plot``      ``tfv-plot``
``python -m experiments.benchmark`` ``tfv-benchmark``
==================================  ================

``configs`` links to the shipped configs (``tfagents_vtrace/configs``, package data named
by ``--config=NAME``): the runs of ``docs/results/`` are these files, each results page
giving its command. Importing a module here runs nothing and defines nothing else: code that
needs a command's functions imports them from :mod:`tfagents_vtrace.commands`.
"""
