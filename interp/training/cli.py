"""``python -m interp.train <model> [--text FILE] [--seed N] [--steps N] [--out DIR]``: train
one of the shipped models' recipes (``interp.training.run.train``) and save it.

Example:
    >>> from interp.training.cli import main
    >>> try:
    ...     main(["--help"])  # prints the usage and exits
    ... except SystemExit:
    ...     pass
    usage: python -m interp.train ...
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from interp.training.recipes import RECIPES
from interp.training.run import train

DESCRIPTION = "Train the models shipped with interp (or the same recipes on your own text)."


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m interp.train <model> [--text FILE] [--seed N] [--steps N] [--out DIR]``."""
    parser = argparse.ArgumentParser(prog="python -m interp.train", description=DESCRIPTION)
    parser.add_argument("model", choices=sorted(RECIPES), help="which recipe to train")
    parser.add_argument("--text", type=Path, help="train on this UTF-8 text file instead")
    parser.add_argument("--seed", type=int, help="random seed (default: the recipe's)")
    parser.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    parser.add_argument("--out", type=Path, help="save the model here (native format)")
    args = parser.parse_args(argv)
    text = args.text.read_text(encoding="utf-8") if args.text is not None else None
    model = train(args.model, text=text, seed=args.seed, steps=args.steps)
    model.cfg.extra["command"] = shlex.join(
        ["python", "-m", "interp.train", *(argv or sys.argv[1:])]
    )
    for key, value in model.cfg.extra.items():
        print(f"{key}: {value}")
    if args.out is not None:
        model.save(args.out)
        print(f"saved to {args.out}")
