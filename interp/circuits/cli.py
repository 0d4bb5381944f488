"""``interp graph``: trace one prompt's attribution graph and write the offline viewer.

    interp graph --model NAME_OR_PATH --transcoders NAME_OR_FOLDER --prompt TEXT --out FILE
        [--node-threshold 0.8] [--edge-threshold 0.98] [--max-feature-nodes N]
        [--max-n-logits 10] [--desired-logit-prob 0.95] [--batch-size 256]
        [--slug NAME] [--json-dir DIR] [--contexts-data FILE] [--contexts-tokens N]
        [--allow-model-mismatch]

Exit codes as ``interp``'s: 0 ok, 1 runtime error, 2 usage error (an unknown model,
transcoders that cannot be loaded or do not fit the model (or whose config names another
model, unless --allow-model-mismatch), a prompt longer than the context,
a threshold outside [0, 1], a contexts file that cannot be read or is too short).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any

from interp.cli.support import UsageError, terminal_text
from interp.shipped.by_name import load_named_model


def _fraction(value: str) -> float:
    number = float(value)
    if not 0.0 <= number <= 1.0:
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {value}")
    return number


def _share(value: str) -> float:
    number = float(value)
    if not 0.0 <= number < 1.0:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1, got {value}")
    return number


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def _out_file(value: str) -> Path:
    path = Path(value)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is a folder; give a file like graph.html")
    return path


def _text(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return value


def add_parser(subparsers: Any) -> None:
    """Register ``interp graph``."""
    parser = subparsers.add_parser(
        "graph",
        help="trace a prompt's attribution graph through transcoders; write the offline viewer",
        description="Replace the model's MLPs by transcoders, compute the prompt's attribution "
        "graph (features, errors and tokens to features and logits), prune it and write one "
        "self-contained HTML page: nodes by layer and position, edges by weight, hover and "
        "click for details, pruning sliders and pinned nodes. The graph JSON is Neuronpedia's "
        "(circuit-tracer's create_graph_files).",
    )
    parser.add_argument("--model", required=True, help="a shipped model name or checkpoint folder")
    parser.add_argument(
        "--transcoders",
        required=True,
        help="transcoders for the model: a shipped name or circuit-tracer's folder "
        "(config.yaml + layer_{i}.safetensors, or a cross-layer transcoder)",
    )
    parser.add_argument(
        "--allow-model-mismatch",
        action="store_true",
        help="use --transcoders whose config names another model than --model (refused by "
        "default: their features mean nothing there)",
    )
    parser.add_argument("--prompt", required=True, type=_text, help="the text to trace")
    parser.add_argument("--out", required=True, type=_out_file, help="the HTML file to write")
    parser.add_argument(
        "--node-threshold",
        type=_fraction,
        default=0.8,
        help="keep the nodes holding this share of the influence on the logits (default 0.8)",
    )
    parser.add_argument(
        "--edge-threshold",
        type=_fraction,
        default=0.98,
        help="keep the edges holding this share of it (default 0.98)",
    )
    parser.add_argument(
        "--max-feature-nodes", type=_positive, help="rank features and keep at most this many"
    )
    parser.add_argument("--max-n-logits", type=_positive, default=10, help="logits to explain")
    parser.add_argument(
        "--desired-logit-prob",
        type=_fraction,
        default=0.95,
        help="explain the top logits up to this cumulative probability (default 0.95)",
    )
    parser.add_argument("--batch-size", type=_positive, default=256, help="rows a backward pass")
    parser.add_argument(
        "--sparse-threshold",
        type=_share,
        help="long prompts: keep only the edges carrying at least this share of their row "
        "(0 keeps every nonzero edge, stored sparse); default: a dense graph",
    )
    parser.add_argument("--slug", default="graph", help="the graph's name in its JSON")
    parser.add_argument(
        "--json-dir", type=Path, help="also keep create_graph_files's JSON files in this folder"
    )
    parser.add_argument(
        "--contexts-data",
        help="a text file (.txt or .txt.gz): a click on a feature shows its top contexts in it",
    )
    parser.add_argument(
        "--contexts-tokens",
        type=_positive,
        default=16384,
        help="read at most this many tokens of --contexts-data (default %(default)s)",
    )
    parser.set_defaults(run=run, parser=parser)


def context_windows(model: Any, path: str, max_tokens: int) -> Any:
    """``path``'s text as token windows [n, seq] holding at most ``max_tokens`` tokens."""
    from interp.circuits.view import CONTEXT_WINDOW
    from interp.sae.features.activations import text_windows

    file = Path(path)
    try:
        data = file.read_bytes()
        text = (gzip.decompress(data) if file.suffix == ".gz" else data).decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise UsageError(f"cannot read --contexts-data {path!r} as UTF-8 text: {error}") from error
    seq_len = min(model.cfg.n_ctx, CONTEXT_WINDOW)
    # a window's worth of characters is at least a window of tokens
    text = text[: max(max_tokens, seq_len) * 64]
    try:
        windows = text_windows(model, text, seq_len)
    except ValueError as error:
        raise UsageError(f"--contexts-data {path!r}: {error}") from error
    return windows[: max(1, max_tokens // seq_len)]


def run(args: argparse.Namespace) -> None:
    from interp.circuits import ReplacementModel, attribute, load_transcoders
    from interp.circuits.graph_files import create_graph_files
    from interp.circuits.view import graph_view
    from interp.viz.report_data import prompt_tokens

    model = load_named_model(args.model)
    try:
        transcoders = load_transcoders(args.transcoders)
        replacement = ReplacementModel.from_model(
            model, transcoders, allow_model_mismatch=args.allow_model_mismatch
        )
    except (ValueError, KeyError, OSError) as error:
        raise UsageError(f"--transcoders {args.transcoders!r}: {error}") from error
    prompt_tokens(model, args.prompt, "prompt (--prompt)")  # not longer than the context
    contexts = None
    if args.contexts_data is not None:  # read before the graph: a bad file fails at once
        contexts = context_windows(model, args.contexts_data, args.contexts_tokens)
    graph = attribute(
        args.prompt,
        replacement,
        max_n_logits=args.max_n_logits,
        desired_logit_prob=args.desired_logit_prob,
        batch_size=args.batch_size,
        max_feature_nodes=args.max_feature_nodes,
        sparse_threshold=args.sparse_threshold,
        verbose=True,  # a progress bar on stderr
    )
    options = {
        "scan": graph.scan or args.transcoders,
        "node_threshold": args.node_threshold,
        "edge_threshold": args.edge_threshold,
    }
    view = graph_view(graph, replacement, slug=args.slug, contexts=contexts, **options)
    path = view.save(args.out)
    if args.json_dir is not None:  # {slug}.json and graph-metadata.json, for Neuronpedia
        create_graph_files(graph, args.slug, args.json_dir, tokenizer=model.tokenizer, **options)
    nodes, links = len(view.graph["nodes"]), len(view.graph["links"])
    print(terminal_text(f"graph written to {path.resolve()} ({nodes} nodes, {links} links)"))
    print(terminal_text(f"{graph!r}"))
