"""One-line command-line errors for the experiments entry points (train, evaluate, export...).

A bad flag value ends the program with one line on stderr, ``error: --FLAG: expected ...,
received ...``, and exit code 2, instead of a Python traceback or absl's two-line ``FATAL
Flags parsing error``. :func:`run` replaces ``absl.app.run`` and turns absl's own parsing
errors (a value of the wrong type, an unknown flag, a missing flagfile or required flag)
into such lines; ``--help`` and ``--helpfull`` print their usage and exit 0. Past parsing,
only errors the entry points name themselves become such lines: :class:`FlagError` (raised
by their argument checks) and the exceptions a caller converts explicitly with
:func:`flag_error_from`; anything else (a real bug deep in the code) still ends in a
traceback. The entry points run the
experiments of Espeholt et al., "IMPALA", 2018, https://arxiv.org/abs/1802.01561.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from absl import app, flags

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


def as_flag_message(message: str) -> str:
    """``"name: ..."`` as ``"--name: ..."`` when ``name`` is a defined flag (the library's
    errors name a setting by its flag's name, without the dashes)."""
    name, sep, rest = message.partition(": ")
    if sep and name in flags.FLAGS:
        return f"--{name}: {rest}"
    return message


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


def run(main: Callable[[list[str]], Any], argv: list[str] | None = None) -> NoReturn:
    """``absl.app.run(main)`` whose flag parsing errors are :func:`fail`'s one line."""
    app.run(main, argv=argv, flags_parser=parse_flags)
    raise AssertionError("unreachable")  # app.run always exits


def parse_flags(argv: list[str]) -> list[str]:
    """``flags.FLAGS(argv)`` (the arguments left for ``main``); a ``flags.Error`` ends the
    program with one line naming the flag (:func:`flag_error_message`, exit code 2)."""
    try:
        return flags.FLAGS(argv)
    except flags.Error as e:
        fail(flag_error_message(e))
    except SystemExit as e:  # absl's help flags print their usage, then exit with code 1
        raise SystemExit(0 if e.code == 1 else e.code) from None


_VALUE_ERROR = re.compile(r"flag --(?P<name>[^=\s]+)=(?P<value>.*?): (?P<message>.*)")
_REQUIRED = re.compile(r"Flag --\S+ must have a value other than None\.?")
_MISSING_VALUE = re.compile(r"Missing value for flag -+(?P<name>\S+)|-+(?P<file>flagfile) with no")


def flag_error_message(error: flags.Error, flag_values: flags.FlagValues = flags.FLAGS) -> str:
    """absl's parsing ``error`` as one line, ``--FLAG: message`` where the flag is known
    (``flag_values``: where the flags are defined, for their parsers' expected values)."""
    cause = error.__context__
    if isinstance(error, flags.UnrecognizedFlagError):
        text = f"--{error.flagname}: unknown flag"
        tip = str(error).partition(". Did you mean: ")[2].rstrip(" ?")
        return text + (f" (did you mean --{tip.replace(', ', ', --')}?)" if tip else "")
    if isinstance(error, flags.CantOpenFlagFileError) and isinstance(cause, OSError):
        return f"--flagfile: cannot open {cause.filename!r}: {cause.strerror}"
    lines = str(error).strip().splitlines() or [type(error).__name__]
    if len(lines) == 1 and isinstance(cause, (TypeError, ValueError, OverflowError)):
        match = _VALUE_ERROR.match(lines[0])
        suffix = f": {cause}"
        if match and lines[0].endswith(suffix):  # a parser rejected the value
            name = match["name"]
            value = lines[0][len(f"flag --{name}=") : -len(suffix)]
            parser = flag_values[name].parser if name in flag_values else None
            return f"--{name}: {_expected(parser, cause, value)}"
    messages = []
    for line in lines:  # validators (e.g. required flags): one line per flag
        match = _VALUE_ERROR.match(line)
        if match is None:
            missing = _MISSING_VALUE.match(line)
            name = missing and (missing["name"] or missing["file"])
            messages.append(f"--{name}: missing value" if name else line)
        elif _REQUIRED.fullmatch(match["message"]):
            messages.append(f"--{match['name']}: required, but not given")
        else:
            messages.append(f"--{match['name']}: {match['message']}")
    return " ".join("; ".join(messages).split())


def _expected(parser: Any, cause: BaseException, value: str) -> str:
    """``parser``'s complaint about ``value``: the project's ``expected ..., received ...``
    wording for absl's stock int / float / bool / enum parsers, else the parser's own."""
    message = str(cause.args[0]) if cause.args else str(cause)
    if message.startswith("expected "):  # the config flags' parsers already say it
        return message
    if isinstance(parser, flags.EnumParser):
        expected = f"one of {', '.join(parser.enum_values)}"
    elif isinstance(parser, flags.BooleanParser):
        expected = "true or false"
    elif isinstance(parser, flags.IntegerParser) and message.startswith("invalid literal"):
        expected = "an integer"
    elif isinstance(parser, flags.FloatParser) and message.startswith("could not convert"):
        expected = "a number"
    else:
        return message if value in message else f"{message}, received {value!r}"
    return f"expected {expected}, received {value!r}"
