"""How the ``grader`` command reads the words typed after it, where argparse by itself reads
them otherwise than the person typing meant. grader/cli.py builds every command from ``Parser``.

- A word that begins with ``-`` and a digit (``-3``, ``-3,4``, ``-1e3``, ``-.5``) is a value.
  argparse takes ``-3`` for a value but ``-3,4`` or ``-1e3`` for an unknown option, and then
  tells someone who typed seeds that ``--seeds`` "expected one argument". No option of the
  grader begins with a digit, so the value reaches the command, whose own check says what
  is wrong with it (a seed is never negative).
- An empty word (``--submission ""``, an unset shell variable) is refused, naming the
  argument: taken as given, it fell back to a default in silence (the stub was graded, the
  working directory graded as a class, the plot not drawn).
- One option given twice with two values (``--secret-file a.secret --secret-file b.secret``)
  is refused: the last one won, in silence. One path spelled two ways (``--course .`` and
  its full path, ``a.py`` and ``./a.py``) is one value, as it was.
- ``--`` before the command ends grader's own options, as it ends a command's after it
  (argparse took it for the command's name).
- "expected one argument" and "arguments are required" say which word was taken for an
  option, and how to give it as a value, or which option came after ``--``; a command
  missing names the commands.
- A positional a command reads as optional only so that ``--help`` needs none
  (``add_needed``) is shown in the usage as the required argument it is.
"""
from __future__ import annotations

import argparse
import os
import re
import sys

VALUE_LIKE = re.compile(r"-\.?\d")        # a negative number or list of them, never an option


class Parser(argparse.ArgumentParser):
    """An ArgumentParser reading words as above. It hooks three of argparse's own steps
    (_parse_optional: is a word an option; _get_values, _get_value: a word as a value),
    which keep their meaning from Python 3.11 to 3.13; tests/test_cli_arguments.py holds
    every command's every option to each rule, so a change there fails a test."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)
        self.words: list[str] = []              # what this parser was given: for its hints
        self.given: dict[str, tuple[str, object]] = {}     # dest -> (the option, its value)
        self.commands = None                    # its subparsers action, if it has commands

    def add_needed(self, dest: str, **kwargs) -> argparse.Action:
        """A positional the command cannot run without, read as optional: its --help is
        answered once the whole line is read, and needs none. The caller asks for it
        (needed_missing); the usage shows it without brackets (Formatter)."""
        action = self.add_argument(dest, nargs="?", **kwargs)
        action.needed = True
        return action

    def needed_missing(self, args) -> list[str]:
        """The needed positionals ``args`` has no value for."""
        return [a.dest for a in self._actions if getattr(a, "needed", False)
                and getattr(args, a.dest, None) is None]

    def add_subparsers(self, **kwargs):
        self.commands = super().add_subparsers(**kwargs)
        return self.commands

    def parse_known_args(self, args=None, namespace=None):
        self.words = list(sys.argv[1:] if args is None else args)
        self.given = {}
        return super().parse_known_args(args, namespace)

    def _parse_optional(self, arg_string):
        if VALUE_LIKE.match(arg_string):
            return None
        return super()._parse_optional(arg_string)

    def _get_values(self, action, arg_strings):
        if action.nargs == argparse.PARSER and arg_strings[:1] == ["--"]:
            arg_strings = arg_strings[1:]       # `grader -- check lesson1`: the command follows
        return super()._get_values(action, arg_strings)

    def _get_value(self, action, arg_string):
        # A command's words go on to its own parser, which checks them one by one.
        if action.nargs not in (argparse.PARSER, argparse.REMAINDER) and not arg_string.strip():
            raise argparse.ArgumentError(action, empty(action))
        return super()._get_value(action, arg_string)

    def value_of(self, dest: str, text: str):
        """``text`` as the value of this parser's argument ``dest``, checked as a value typed
        in its place is (for a word argparse left over, which _parse places itself)."""
        action = next(a for a in self._actions if a.dest == dest)
        try:
            return self._get_value(action, text)
        except argparse.ArgumentError as e:
            self.error(str(e))

    def error(self, message):
        super().error(message + self._hint(message))

    def _hint(self, message: str) -> str:
        """What argparse's ``message`` leaves out: which word it took for an option and how
        to give it as a value, that a flag takes none, which commands there are."""
        missing = re.match(r"argument (\S+): expected one argument", message)
        if missing:
            flags = missing.group(1).split("/")
            at = next((i for i, w in enumerate(self.words) if w in flags), None)
            if at is None:
                return ""
            if at + 1 == len(self.words):
                return f" (nothing follows {self.words[at]}: give its value after it)"
            after = self.words[at + 1]
            if after.startswith("-"):
                return (f" ({after} was read as an option; if it is the value, write "
                        f"{self.words[at]}={after})")
            return ""
        if re.match(r"argument \S+: ignored explicit argument", message):
            return " (it is a flag: it takes no value)"                    # `--json=yes`
        if self.commands is not None and message.endswith(f"are required: {self.commands.dest}"):
            return f" (one of: {', '.join(self.commands.choices)})"       # `grader sheet`
        if message.startswith("the following arguments are required"):
            # Every word after `--` is a value: a required option typed there was taken as one.
            cut = self.words.index("--") if "--" in self.words else len(self.words)
            missing = message.split(": ", 1)[1].split(", ")
            late = next((w for w in self.words[cut + 1:]
                         if w.startswith("-") and w.split("=", 1)[0] in missing), None)
            if late is not None:
                return f" ({late.split('=', 1)[0]} {AFTER_DOUBLE_DASH})"
            dashed = next((w for w in self.words[:cut] if w.startswith("-") and not self.knows(w)), None)
            if dashed is not None:
                return (f" ({dashed} was read as an option; a value that begins with - goes "
                        f"after --, as in: -- {dashed})")
        return ""

    def knows(self, word: str) -> bool:
        """Whether ``word`` is one of this parser's options (or an abbreviation of one)."""
        name = word.split("=", 1)[0]
        return any(flag == name or (name.startswith("--") and flag.startswith(name))
                   for flag in self._option_string_actions)

    def options(self) -> list[str]:
        """Its long options as --help lists them (--version after a command is not listed)."""
        return sorted(f for f, action in self._option_string_actions.items()
                      if f.startswith("--") and action.help != argparse.SUPPRESS)


AFTER_DOUBLE_DASH = "came after --, which makes every word after it a value: give options before --"


class Formatter(argparse.RawDescriptionHelpFormatter):
    """The usage of a parser with a needed positional (Parser.add_needed): `name`, not
    `[name]`, which told the person reading it that the command runs without one. It hooks
    argparse's _format_args (the same from Python 3.11 to 3.13); tests/test_cli_arguments.py
    holds every command's usage to what its error says is required."""

    def _format_args(self, action, default_metavar):
        if getattr(action, "needed", False):
            return self._metavar_formatter(action, default_metavar)(1)[0]
        return super()._format_args(action, default_metavar)


def empty(action: argparse.Action) -> str:
    """An empty value's error, with what the argument expects (its help's words)."""
    wanted = action.help if action.help and action.help != argparse.SUPPRESS else "a value"
    return f"is empty (a shell variable not set?); expected {wanted}"


class StoreOnce(argparse.Action):
    """argparse's store, but an option given a second, different value is refused rather
    than the first one dropped."""

    def __call__(self, parser, namespace, values, option_string=None):
        if option_string is not None and isinstance(parser, Parser):
            first = parser.given.get(self.dest)
            if first is not None and not one_value(first[1], values):
                raise argparse.ArgumentError(self, f"given twice ({first[0]} {first[1]} and "
                                                   f"{option_string} {values}): give it once")
            parser.given[self.dest] = (option_string, values)
        setattr(namespace, self.dest, values)


def one_value(first, second) -> bool:
    """Whether two values typed for one option are one: equal, or one path spelled two ways
    (`.` and the folder's full path): nothing there for the grader to pick between."""
    return first == second or (isinstance(first, str) and isinstance(second, str)
                               and os.path.realpath(first) == os.path.realpath(second))


def whole_number(text: str) -> int:
    """A count typed on the command line (--jobs): an integer, else its argument's error."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
