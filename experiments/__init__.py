"""The commands, as the clone runs them: ``python -m experiments.train`` etc.

Each module here stands for the module of the same name in :mod:`tfagents_vtrace.commands`
(the ``tfv-train``, ``tfv-evaluate``... console scripts of an installed package). Run with
``-m``, it runs that command; imported, it is that module (``sys.modules`` maps its name to
it), so ``from experiments import evaluate`` gives every name of
``tfagents_vtrace.commands.evaluate``, private ones included, and patching one patches the
command. ``configs`` links to the shipped flagfiles, ``tfagents_vtrace/configs``.
"""
