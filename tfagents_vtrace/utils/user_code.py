"""A user's own code named by an import path ``"package.module:Name"``: the one importer of
the environments (``--env=package.module:Env-v0``, :mod:`tfagents_vtrace.envs.user_envs`)
and of the network layers (``--torso=package.module:Name``,
:mod:`tfagents_vtrace.networks.user_layers`).

A module is imported only *because the user named it* (a keyword, a flag): what a run
directory's ``config.json`` holds is data and never imports anything. A class or function
given from Python is recorded by its import path (:func:`object_path`), which must lead back
to the same object, so that the same run can be resumed and exported by naming it again.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def split_path(path: str, name: str, example: str = "package.module:Name") -> tuple[str, str]:
    """``(module, rest)`` of ``"module:rest"``; ValueError naming ``name`` when either is empty."""
    module, _, rest = path.partition(":")
    if not module.strip() or not rest.strip():
        raise ValueError(f"{name}: expected {example!r}, received {path!r}")
    return module.strip(), rest.strip()


def import_module_named(module: str, name: str) -> ModuleType:
    """Imports ``module``, which the user named (setting ``name``).

    Raises:
      ValueError: ``"{name}: cannot import ..."`` when the module itself is not found (with
        a hint to put its directory on PYTHONPATH); an error raised by the module's own code
        while it imports propagates.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        hint = ""  # the module itself not found, not one it imports
        if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
            hint = "; put the directory that holds it on PYTHONPATH"
        raise ValueError(f"{name}: cannot import {module!r} ({e}){hint}") from None


def object_from_path(path: str, name: str) -> Any:
    """The object ``"package.module:Qual.Name"`` names: the module imported (the user named
    it), then the dotted attribute path looked up in it.

    Raises:
      ValueError: naming ``name``, for a malformed path, a module that cannot be found, or a
        module without that attribute.
    """
    module_name, qualname = split_path(path, name)
    obj: Any = import_module_named(module_name, name)
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"{name}: module {module_name!r} has no {qualname!r} (from {path!r})")
        obj = getattr(obj, part)
    return obj


def object_path(obj: Any, name: str) -> str:
    """``obj.__module__ + ":" + obj.__qualname__``, the path a run records for a class or
    function given from Python; it must import back to ``obj`` (a later run names it again).

    Raises:
      ValueError: one line naming ``name`` and why, for a lambda, an object defined inside a
        function or in ``__main__`` (a script run as the program), or one that its path does
        not lead back to.
    """
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if not module or not qualname:
        raise ValueError(f"{name}: {obj!r} has no __module__ / __qualname__ to import it by")
    path = f"{module}:{qualname}"
    why = None
    if qualname == "<lambda>" or qualname.endswith(".<lambda>"):
        why = "a lambda has no name to import it by"
    elif "<locals>" in qualname:
        why = "it is defined inside a function"
    elif module == "__main__":
        why = "it is defined in the script run as the program (__main__)"
    if why is None:
        try:
            found = object_from_path(path, name)
        except ValueError:
            found = None
        if found is not obj:
            why = f"importing {path!r} does not give it back"
    if why is not None:
        raise ValueError(
            f"{name}: {path!r} cannot be imported by its path ({why}); define it at the top "
            "level of a module of your own and pass it, or its path 'package.module:Name'"
        )
    return path
