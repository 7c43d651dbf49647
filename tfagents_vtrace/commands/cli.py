"""One-line command-line errors for the commands (tfv-train, tfv-evaluate, tfv-export...).

A bad flag value ends the program with one line on stderr, ``error: --FLAG: expected ...,
received ...``, and exit code 2, instead of a Python traceback or absl's two-line ``FATAL
Flags parsing error``. :func:`run` replaces ``absl.app.run`` and turns absl's own parsing
errors (a value of the wrong type, an unknown flag, a missing required flag) and a flagfile
that cannot be read into such lines; ``--help`` and ``--helpfull`` print their usage and
exit 0. A positional argument (``total_steps=5`` for ``--total_steps=5``), which absl would
hand to ``main`` and the commands would ignore, is such a line too, naming it; only a
command that passes arguments on (``tfv-benchmark``, ``run(..., passthrough=True)``) takes
those after ``--``. Past parsing, only errors the entry points name themselves become such
lines: :class:`FlagError` (raised by their argument checks) and the exceptions a caller
converts explicitly with :func:`flag_error_from`; anything else (a real bug deep in the
code) still ends in a traceback. The entry points run the experiments of Espeholt et al.,
"IMPALA", 2018, https://arxiv.org/abs/1802.01561.

absl's ``--help`` describes the ``__main__`` module: its docstring and the flags it declared.
A console script's ``__main__`` (and the ``experiments/`` shims) declare none, so :func:`run`
lends them the command module's docstring and key flags (``command=``); ``short_help=``
replaces absl's ``--help`` text altogether (``tfv-train``'s grouped flags).
"""

from __future__ import annotations

import functools
import io
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from absl import app, flags

from tfagents_vtrace.utils.flagfiles import FlagfileError, expand_flagfiles

EXIT_USAGE = 2
EXIT_FAULT = 1


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


def fault(message: str) -> NoReturn:
    """Prints ``error: message`` on stderr and exits with code 1: a fault (a damaged file, a
    failing environment, memory running out), not a bad argument."""
    sys.stdout.flush()
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(EXIT_FAULT)


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
    from tfagents_vtrace.utils.validation import check_int as check  # no TensorFlow import

    try:
        check(flag, value, minimum)
    except ValueError as e:  # "flag: expected ..." (the configs' wording) -> "--flag: ..."
        raise FlagError(flag, str(e).split(": ", 1)[1]) from None
    return value


def run(
    main: Callable[[list[str]], Any],
    argv: list[str] | None = None,
    *,
    command: types.ModuleType | None = None,
    short_help: Callable[[], str] | None = None,
    passthrough: bool = False,
) -> NoReturn:
    """``absl.app.run(main)`` whose flag parsing errors are :func:`fail`'s one line.

    Args:
      main: absl's ``main(argv)``.
      argv: the command line (default ``sys.argv``).
      command: the module that declares the flags, when it is not ``__main__`` (a console
        script, a shim): absl's ``--help`` then shows its docstring and its key flags.
      short_help: returns the text ``--help`` prints instead of absl's (exit code 0);
        ``--helpfull`` still lists every flag.
      passthrough: ``main`` takes the arguments after ``--`` (``argv[1:]``); without it any
        positional argument is refused, and with it one before ``--`` is
        (:func:`positional_error`).
    """
    argv = sys.argv if argv is None else argv
    quiet_when_closed()
    if command is not None:
        _describe_as_main(command)
    if short_help is not None and asks_for_help(argv):
        sys.stdout.write(short_help())
        sys.stdout.flush()
        raise SystemExit(0)
    app.run(main, argv=argv, flags_parser=functools.partial(parse_flags, passthrough=passthrough))
    raise AssertionError("unreachable")  # app.run always exits


class _QuietWhenClosed(io.TextIOBase):
    """``stream`` until writing to it fails because its reader went away (a pipe whose
    reader ended, ``tfv-train ... 2>&1 | head``; a closed terminal): from then on what is
    written goes nowhere, and the file descriptor is pointed at ``/dev/null`` so that
    TensorFlow's own logs and the interpreter's last flush do not fail either. A command's
    output is for the person watching; the run's files hold what it reports."""

    def __init__(self, stream):
        self._stream, self._closed = stream, False

    def _gone(self) -> None:
        self._closed = True
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), self._stream.fileno())
        except (OSError, ValueError, AttributeError):  # no descriptor to point elsewhere
            pass

    def write(self, text: str) -> int:
        if not self._closed:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self._closed:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._gone()

    def isatty(self) -> bool:
        try:
            return not self._closed and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def fileno(self) -> int:
        return self._stream.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self):
        return getattr(self._stream, "encoding", "utf-8")


def quiet_when_closed() -> None:
    """Makes ``sys.stdout`` and ``sys.stderr`` :class:`_QuietWhenClosed` (once), so that no
    print of a command (a progress line, ``Resuming ...``, the stop's ``interrupted at step
    N``, the final JSON line) ends it with ``BrokenPipeError`` when its reader went away."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, _QuietWhenClosed):
            setattr(sys, name, _QuietWhenClosed(stream))


HELP_ARGS = ("--help", "-help", "--helpshort", "-helpshort", "-?")
"""absl's short-help flags (``--helpfull`` is not one of them)."""


def asks_for_help(argv: list[str]) -> bool:
    """Whether ``argv[1:]`` holds one of :data:`HELP_ARGS` before a ``--``."""
    for arg in argv[1:]:
        if arg == "--":
            return False
        if arg in HELP_ARGS:
            return True
    return False


def _describe_as_main(module: types.ModuleType) -> None:
    """Gives ``__main__`` the docstring and key flags of ``module`` (absl's ``--help`` reads
    both from ``__main__``, whose flags it looks up under ``sys.argv[0]``)."""
    main = sys.modules.get("__main__")
    if main is None or main is module:
        return
    main.__doc__ = module.__doc__
    for flag in flags.FLAGS.get_key_flags_for_module(module.__name__):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)


def describe_flag(
    name: str, help_text: str, default: str | None = None, syntax: str | None = None
) -> str:
    """One flag as absl's ``--help`` lists it: ``--name: help``, then its default and syntax
    in parentheses, wrapped and indented by two / four spaces."""
    text = flags.text_wrap(f"--{name}: {help_text}", indent="    ", firstline_indent="  ")
    for extra in (f"default: {default}" if default else None, syntax):
        if extra:
            text += "\n" + flags.text_wrap(f"({extra})", indent="    ")
    return text


def describe_flags(
    title: str,
    names: list[str],
    values: flags.FlagValues = flags.FLAGS,
    extra: dict[str, str] | None = None,
) -> str:
    """``title:`` then :func:`describe_flag` of each flag of ``names`` defined in ``values``
    (or given its help text in ``extra``)."""
    lines = [f"{title}:"]
    for name in names:
        if name in values:
            flag = values[name]
            label = f"[no]{name}" if flag.boolean else name
            lines.append(
                describe_flag(label, flag.help, flag.default_as_str, flag.parser.syntactic_help)
            )
        elif extra and name in extra:
            lines.append(describe_flag(name, extra[name]))
    return "\n".join(lines) + "\n"


def parse_flags(argv: list[str], passthrough: bool = False) -> list[str]:
    """``flags.FLAGS(argv)`` (the arguments left for ``main``) of ``argv`` with its flagfiles
    read in place by :func:`~tfagents_vtrace.utils.flagfiles.expand_flagfiles` (absl never
    reads one itself). A flagfile that cannot be read, a ``flags.Error`` (one line naming the
    flag: :func:`flag_error_message`) and a positional argument ``main`` would not take
    (:func:`positional_error`) end the program with one line and exit code 2."""
    try:
        argv = [argv[0], *expand_flagfiles(argv[1:])]
    except FlagfileError as e:
        fail(f"--flagfile: {e}")
    try:
        rest = flags.FLAGS(argv)
    except flags.Error as e:
        fail(flag_error_message(e))
    except SystemExit as e:  # absl's help flags print their usage, then exit with code 1
        raise SystemExit(0 if e.code == 1 else e.code) from None
    error, rest = positional_error(argv, rest, passthrough)
    if error:
        fail(error)
    return rest


def positional_error(
    argv: list[str], rest: list[str], passthrough: bool = False
) -> tuple[str | None, list[str]]:
    """``(error, rest)`` of what absl left of ``argv`` (``rest``: the program's name, the
    positional arguments, then everything after ``--``).

    absl hands positional arguments to ``main``, where a command ignores them: a missing
    ``--`` (``total_steps=5``) would silently train with the default. Without
    ``passthrough`` every one is refused; with it, those after the first ``--`` go on to
    ``main`` and those before it are refused. ``error`` is the one line naming them (with
    ``--NAME=VALUE`` suggested where ``NAME`` is a flag), else None.
    """
    args = list(rest[1:])
    after: list[str] = []
    if passthrough and "--" in argv[1:]:
        tail = argv[argv.index("--", 1) + 1 :]
        if tail and args[-len(tail) :] == tail:
            args, after = args[: -len(tail)], tail
    if not args:
        return None, [rest[0], *after]
    shown = ", ".join(repr(a) for a in args[:5]) + (", ..." if len(args) > 5 else "")
    noun = "argument" if len(args) == 1 else "arguments"
    message = f"{shown}: unexpected {noun} (flags are written --NAME=VALUE"
    name = args[0].partition("=")[0].lstrip("-")
    if args[0].startswith("-"):  # after a --, where absl stops reading flags
        message += "; flags after -- are not read: put them before it"
    elif name and (name in flags.FLAGS or name.removeprefix("no") in flags.FLAGS):
        message += f"; did you mean --{args[0]}?"
    if passthrough:
        message += "; arguments for the program run go after --"
    return message + ")", rest


_VALUE_ERROR = re.compile(r"flag --(?P<name>[^=\s]+)=(?P<value>.*?): (?P<message>.*)")
_REQUIRED = re.compile(r"Flag --\S+ must have a value other than None\.?")
_MISSING_VALUE = re.compile(r"Missing value for flag -+(?P<name>\S+)")


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
            name = missing and missing["name"]
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
