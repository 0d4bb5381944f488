"""The ``interp`` command (``main``, in ``interp.cli.commands``) and what its subcommands share
(``interp.cli.support``: errors, exit codes, terminal escaping).

Importing this package loads nothing else: the names of ``interp.cli.commands`` (``main``,
``DEMO_PROMPT``, ``hook_shapes``, ...) load it when first read, so a subcommand's module
(``interp.harvest.cli``, which ``torchrun -m interp.harvest`` runs) can import
``interp.cli.support`` without loading every other subcommand.

Example:
    >>> from interp.cli import DEMO_MODEL
    >>> DEMO_MODEL
    'attn-only-2l'
"""

from __future__ import annotations

import importlib
from typing import Any

# interp.cli.commands's names, read from there on first use
_COMMAND_NAMES = frozenset(
    (
        "DEMO_ANSWERS", "DEMO_CORRUPTED", "DEMO_MODEL", "DEMO_PROMPT", "MANY_FORWARDS",
        "CommandError", "UsageError", "build_parser", "check_report_inputs", "hook_shapes",
        "load_named_model", "main", "terminal_text",
    )
)  # fmt: skip


def __getattr__(name: str) -> Any:
    if name not in _COMMAND_NAMES:
        raise AttributeError(f"module 'interp.cli' has no attribute {name!r}")
    commands = importlib.import_module("interp.cli.commands")  # loads every subcommand
    return getattr(commands, name)
