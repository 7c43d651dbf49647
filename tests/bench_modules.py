"""A script of ``benchmarks/`` loaded by its path, for the tests of the benchmarks.

``benchmarks/`` is not a package, and putting it on ``sys.path`` would let
``benchmarks/minatar.py`` shadow the ``minatar`` package.
"""

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(name: str, module_name: str | None = None, *, register: bool = False):
    """``benchmarks/<name>.py`` as a module named ``module_name`` (default ``name``);
    ``register`` also puts it in ``sys.modules`` before it runs (dataclasses look their
    module up by name; Ray pickles classes by value from a registered module)."""
    spec = importlib.util.spec_from_file_location(module_name or name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
