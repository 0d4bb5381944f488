"""``interp harvest`` and ``python -m interp.harvest`` (the entry point ``torchrun`` launches):

    interp harvest --model NAME_OR_PATH --data FILE_OR_DIR --hooks NAMES --out DIR
        [--seq-len N] [--batch-size N] [--max-tokens N] [--dtype bf16|fp16|fp32]
        [--positions 1:] [--shard-tokens N] [--text-field NAME] [--no-progress]
    torchrun --nproc-per-node 8 -m interp.harvest --model ... --out DIR

Exit codes as ``interp``'s: 0 ok, 1 runtime error, 2 usage error (bad arguments, an unknown
hook or model, a sequence longer than the model's context, an output folder that holds
another harvest).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from interp.cli.support import Parser, UsageError, run_command, terminal_text
from interp.harvest.harvester import DEFAULT_SHARD_TOKENS, DTYPES, harvest

DESCRIPTION = (
    "Run a model over a dataset and store the activations of the given hooks as safetensors "
    "shards with a manifest; rerun the same command to resume; launch with torchrun -m "
    "interp.harvest to use several processes."
)


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", required=True, help="a shipped model name, checkpoint folder or hub id"
    )
    parser.add_argument(
        "--data",
        required=True,
        help="a file or folder: .txt, .jsonl, .parquet, a datasets save_to_disk folder, or "
        "token ids (.npy/.pt/.safetensors); .gz text and JSON lines too",
    )
    parser.add_argument(
        "--hooks",
        required=True,
        help="comma-separated hook names, e.g. blocks.3.hook_resid_post,blocks.3.hook_mlp_out",
    )
    parser.add_argument(
        "--out", required=True, help="the output folder (resumes if it holds this same harvest)"
    )
    parser.add_argument("--seq-len", type=_positive, help="tokens a sequence (default: n_ctx)")
    parser.add_argument("--batch-size", type=_positive, default=8, help="sequences a forward")
    parser.add_argument("--max-tokens", type=_positive, help="stop after this many tokens")
    parser.add_argument("--dtype", choices=sorted(DTYPES), help="stored dtype (default: model's)")
    parser.add_argument(
        "--positions", help="positions of each sequence to keep, a Python slice: '1:' drops BOS"
    )
    parser.add_argument(
        "--shard-tokens",
        type=_positive,
        default=DEFAULT_SHARD_TOKENS,
        help="vectors a shard (rounded down to whole sequences; default: %(default)s)",
    )
    parser.add_argument("--text-field", default="text", help="JSON/Parquet/datasets text field")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Register ``interp harvest``."""
    parser = subparsers.add_parser(
        "harvest",
        help="harvest activations over a dataset into resumable shards",
        description=DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(run=run, parser=parser)
    return parser


def run(args: argparse.Namespace) -> None:
    """Harvest from parsed arguments; bad input is a ``UsageError`` (exit 2)."""
    try:
        manifest = harvest(
            args.model,
            args.data,
            args.hooks,
            args.out,
            seq_len=args.seq_len,
            batch_size=args.batch_size,
            max_tokens=args.max_tokens,
            dtype=args.dtype,
            positions=args.positions,
            shard_tokens=args.shard_tokens,
            text_field=args.text_field,
            progress=not args.no_progress,
        )
    except (KeyError, FileExistsError, FileNotFoundError) as error:
        raise UsageError(error.args[0] if error.args else str(error)) from error
    except ValueError as error:
        raise UsageError(str(error)) from error
    if os.environ.get("RANK", "0") == "0":
        print(
            terminal_text(
                f"harvested {manifest['n_tokens']} tokens x {len(manifest['config']['hooks'])} "
                f"hooks in {manifest['n_shards']} shards to {args.out}"
            )
        )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m interp.harvest ARGS``: the same as ``interp harvest ARGS``.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> folder = Path(tempfile.mkdtemp())
        >>> _ = (folder / "a.txt").write_text("To be, or not to be. " * 20)
        >>> main(["--model", "shakespeare-char", "--data", str(folder / "a.txt"), "--hooks",
        ...       "blocks.0.hook_resid_post", "--out", str(folder / "acts"), "--seq-len", "64",
        ...       "--no-progress"])
        harvested 384 tokens x 1 hooks in 1 shards to .../acts
        0
    """
    parser = Parser(prog="interp harvest", description=DESCRIPTION)
    add_arguments(parser)
    parser.set_defaults(run=run, parser=parser)
    return run_command(parser.parse_args(sys.argv[1:] if argv is None else argv))
