"""Your own torso and core in the actor-critic network, named by import path.

``NetworkConfig.torso`` and ``NetworkConfig.core`` hold either a built-in name or the import
path ``"package.module:Name"`` of a layer of the user's own:

* torso: a ``keras.layers.Layer`` subclass, or a function ``(observation_space) -> Layer``;
* core: a Keras RNN cell (``keras.layers.LSTMCell`` / ``GRUCell``-like: ``state_size`` and
  ``call(x, states) -> (y, new_states)``), a subclass or such a function.

A class is constructed with no arguments, or with ``observation_space=`` (the run's gymnasium
observation space) when its ``__init__`` has a parameter of that name; a function is called
with the observation space. What the layers receive and return is in
:class:`~tfagents_vtrace.networks.actor_critic.ActorCriticNetwork` and docs/guide/extending.md.

:func:`resolve` turns what a user gives (the class or function, or its path, whose module is
imported because the user named it: :mod:`tfagents_vtrace.utils.user_code`) into the path a
run records and keeps the object in this process's registry; :func:`build` makes the layer
from a path in the registry only. A path read back from a run directory's ``config.json``
therefore never imports anything: resuming or exporting such a run needs the same
``torso=`` / ``core=`` again. A :class:`~tfagents_vtrace.networks.NetworkConfig` sent to
another process (a Ray actor) carries its user objects by reference (pickle's import by
module and name, the path itself).
"""

from __future__ import annotations

import inspect
from typing import Any

import keras

from tfagents_vtrace.utils.user_code import object_from_path, object_path

# The settings that take a layer of one's own, and what each must be.
KINDS = {"torso": "a keras.layers.Layer", "core": "a Keras RNN cell (LSTMCell / GRUCell-like)"}
_REGISTRY: dict[str, Any] = {}


def is_user_path(value: Any) -> bool:
    """Whether ``value`` is an import path ``"package.module:Name"`` (not a built-in name)."""
    return isinstance(value, str) and ":" in value


def resolve(value: Any, name: str) -> Any:
    """The value ``NetworkConfig.<name>`` records for what the user gave: a built-in name (or
    None) as it is; a class, a function or an import path as the path, with the object kept
    in the registry (the path's module is imported: the user named it).

    Raises:
      ValueError: one line naming ``name``, for a layer instance, a lambda or a local or
        ``__main__`` object (not importable by its path), a path whose module or attribute
        is missing, or an object that is neither a ``keras.layers.Layer`` subclass nor a
        function.
    """
    if value is None or (isinstance(value, str) and not is_user_path(value)):
        return value
    what = KINDS[name]
    if isinstance(value, str):
        path, obj = value.strip(), object_from_path(value.strip(), name)
    elif isinstance(value, keras.layers.Layer):
        raise ValueError(
            f"{name}: received a layer instance ({type(value).__name__}); pass its class, or a "
            "function (observation_space) -> layer: a run builds the network more than once "
            "(learner, actors, evaluation, export)"
        )
    else:
        obj = value
        if not callable(obj):
            raise ValueError(
                f"{name}: expected a built-in name, {what} class, a function returning one or "
                f"its path 'package.module:Name', received {value!r}"
            )
        path = object_path(obj, name)
    if inspect.isclass(obj):
        if not issubclass(obj, keras.layers.Layer):
            raise ValueError(
                f"{name}: {path!r} is a class but not a keras.layers.Layer subclass; expected "
                f"{what} class or a function returning one"
            )
    elif not callable(obj):
        raise ValueError(f"{name}: {path!r} is neither {what} class nor a function")
    _REGISTRY[path] = obj
    return path


def registered(path: str) -> Any:
    """The object :func:`resolve` kept for ``path`` in this process, or None."""
    return _REGISTRY.get(path)


def register(path: str, obj: Any) -> None:
    """Keeps ``obj`` under ``path`` (a config unpickled in another process, see module
    docstring)."""
    _REGISTRY[path] = obj


def build(path: str, observation_space, name: str) -> keras.layers.Layer:
    """A new layer of the registered ``path``: the class constructed (with
    ``observation_space=`` when its ``__init__`` takes it), or the function called with the
    observation space.

    Raises:
      ValueError: naming ``name``, when ``path`` was never given in this process (a run
        directory's ``config.json`` never imports code: pass ``name=path`` again), or when
        what it builds is not a ``keras.layers.Layer``.
    """
    obj = _REGISTRY.get(path)
    if obj is None:
        raise ValueError(
            f"{name}: {path!r} is a layer of your own, and a run directory never imports code: "
            f"pass {name}={path!r} (--{name}={path}) to build this network"
        )
    if inspect.isclass(obj):
        takes_space = "observation_space" in inspect.signature(obj.__init__).parameters
        layer = obj(observation_space=observation_space) if takes_space else obj()
    else:
        layer = obj(observation_space)
    if not isinstance(layer, keras.layers.Layer):
        raise ValueError(
            f"{name}: {path!r} returned {type(layer).__name__}, expected {KINDS[name]}"
        )
    return layer
