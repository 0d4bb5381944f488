"""What the ``interp`` command and its subcommands' modules (``interp.cli``, ``interp.*.cli``)
share: the two error types a subcommand raises, terminal escaping, the argparse parser that
escapes what it prints, and the runner that turns errors into exit codes (0 ok, 1 runtime
error, 2 usage error). Library code never imports this module (an import-linter contract).

Example:
    >>> from interp.cli.commands import build_parser
    >>> args = build_parser().parse_args(["hooks", "--model", "attn-only-2l"])
    >>> exit_code = run_command(args)   # args.run(args); args.parser prints usage errors
    20 hook points of attn-only-2l; ...
    >>> exit_code
    0
"""

from __future__ import annotations

import argparse
import sys

from interp.shipped.by_name import UnknownModelError
from interp.viz.report_data import PromptTooLongError


class CommandError(Exception):
    """A failure to report on stderr with exit code 1 (no traceback)."""


class UsageError(Exception):
    """A bad argument found after parsing (it needed the model): usage, the message, exit 2."""


def terminal_text(text: str) -> str:
    r"""``text`` with every character ``repr`` would escape (control and format characters,
    such as ANSI escape sequences) written as its escape; newlines and tabs kept.

    Example:
        >>> terminal_text("\x1b[31mred\n")
        '\\x1b[31mred\n'
    """
    return "".join(
        char if char.isprintable() or char in "\n\t" else repr(char)[1:-1] for char in text
    )


class Parser(argparse.ArgumentParser):
    """argparse, with control characters escaped in what it prints (usage, errors, help)."""

    def _print_message(self, message: str, file=None) -> None:
        super()._print_message(terminal_text(message), file)


def run_command(args: argparse.Namespace) -> int:
    """Run ``args.run(args)``; returns the exit code: 0 ok, 1 for a runtime error (printed on
    stderr, escaped, without a traceback). A usage error (``UsageError``, an unknown model,
    a prompt longer than the model's context) prints ``args.parser``'s usage and exits 2
    (``SystemExit``), as argparse does.

    Example:
        >>> from interp.cli.commands import build_parser
        >>> run_command(build_parser().parse_args(["hooks", "--model", "attn-only-2l"]))
        20 hook points of attn-only-2l; ...
        0
    """
    try:
        args.run(args)
    except (UsageError, UnknownModelError, PromptTooLongError) as error:
        args.parser.error(str(error))
    except (CommandError, ValueError, KeyError, FileNotFoundError, RuntimeError, OSError) as error:
        print(terminal_text(f"interp: error: {error}"), file=sys.stderr)
        return 1
    return 0
