"""One-line command-line errors for the experiments entry points (evaluate, export, plot...).

A bad flag value ends the program with one line on stderr, ``error: --FLAG: expected ...,
received ...``, and exit code 2, instead of a Python traceback. Only errors the entry points
name themselves become such lines: :class:`FlagError` (raised by their argument checks) and
the exceptions a caller converts explicitly with :func:`flag_error_from`; anything else
(a real bug deep in the code) still ends in a traceback. The entry points run the
experiments of Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

EXIT_USAGE = 2


class FlagError(ValueError):
    """A bad command-line value; ``str(error)`` is ``"--FLAG: message"``."""

    def __init__(self, flag: str, message: str):
        self.flag = flag
        super().__init__(f"--{flag}: {message}")


def fail(message: str) -> NoReturn:
    """Prints ``error: message`` on stderr and exits with code 2."""
    sys.stdout.flush()
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_USAGE)


def reports_flag_errors(main: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
    """Wraps an absl ``main(argv)``: a :class:`FlagError` becomes :func:`fail`'s one line."""

    @functools.wraps(main)
    def wrapped(argv: list[str]) -> Any:
        try:
            return main(argv)
        except FlagError as e:
            fail(str(e))

    return wrapped


@contextmanager
def flag_error_from(flag: str, *errors: type[BaseException]) -> Iterator[None]:
    """Re-raises the listed exception types raised inside the block as ``FlagError(flag)``."""
    try:
        yield
    except errors as e:
        raise FlagError(flag, str(e)) from e


def check_int(flag: str, value: int, minimum: int) -> int:
    """``value`` if it is an int >= ``minimum``, else a :class:`FlagError` naming ``flag``."""
    from tfagents_vtrace.validation import check_int as check  # no TensorFlow import

    try:
        check(flag, value, minimum)
    except ValueError as e:  # "flag: expected ..." (the configs' wording) -> "--flag: ..."
        raise FlagError(flag, str(e).split(": ", 1)[1]) from None
    return value
