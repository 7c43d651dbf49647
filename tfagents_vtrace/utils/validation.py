"""The checks every config dataclass runs in ``__post_init__`` (one module, no TensorFlow).

Each raises ``ValueError("NAME: expected ..., received VALUE")``: NAME is the config field,
which is also the ``tfv-train`` flag of the same name, so the message tells a user
which flag to change and to what.
"""

from __future__ import annotations

import math
from collections.abc import Iterable


def check_int(name: str, value, low: int) -> None:
    """Raises ValueError unless ``value`` is a non-bool int ``>= low``."""
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name}: expected an int >= {low}, received {value!r}")


def check_number(
    name: str,
    value,
    low: float = -math.inf,
    high: float = math.inf,
    low_open: bool = True,
    high_open: bool = True,
) -> None:
    """Raises ValueError unless ``value`` is a finite non-bool number in the interval from
    ``low`` to ``high`` (each end open or closed as told)."""
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ok = ok and (value > low if low_open else value >= low)
    ok = ok and (value < high if high_open else value <= high)
    if not ok:
        lb, hb = "(" if low_open else "[", ")" if high_open else "]"
        raise ValueError(f"{name}: expected a number in {lb}{low}, {high}{hb}, received {value!r}")


def check_positive(name: str, value, *, allow_zero: bool = False) -> None:
    """Raises ValueError unless ``value`` is a finite number > 0 (>= 0 with ``allow_zero``)."""
    check_number(name, value, 0.0, math.inf, not allow_zero, True)


def check_choice(name: str, value, choices: Iterable) -> None:
    """Raises ValueError unless ``value`` is one of ``choices``."""
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name}: expected one of {choices}, received {value!r}")


def check_bool(name: str, value) -> None:
    """Raises ValueError unless ``value`` is a bool."""
    if not isinstance(value, bool):
        raise ValueError(f"{name}: expected a bool, received {value!r}")


def check_sizes(name: str, value) -> tuple[int, ...]:
    """``value`` (a sequence of layer sizes, e.g. a list from JSON) as a tuple of ints >= 1."""
    try:
        sizes = tuple(int(v) for v in value)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name}: expected a sequence of ints, received {value!r}") from err
    if not sizes or min(sizes) < 1:
        raise ValueError(f"{name}: expected >= 1 positive sizes, received {value!r}")
    return sizes
