"""``interp features`` and ``interp report --sae``:

    interp features --model NAME_OR_PATH --sae NAME_OR_FOLDER --data FILE --out DIR
        [--n-features N] [--k N] [--seq-len N] [--max-tokens N] [--prompt TEXT ...]
        [--allow-model-mismatch]
    interp report --model M --prompt TEXT --out FILE --sae NAME_OR_FOLDER [--sae-data FILE]
        [--allow-model-mismatch]

Exit codes as ``interp``'s: 0 ok, 1 runtime error, 2 usage error (an unknown model or SAE,
an SAE that does not fit the model or whose config names another model, unless
--allow-model-mismatch, a data file that cannot be read or is too short).
"""

from __future__ import annotations

import argparse
import gzip
from pathlib import Path
from typing import Any

from interp.cli.support import UsageError, terminal_text
from interp.shipped.by_name import load_named_model

MAX_REPORT_CARDS = 30  # feature cards in a report: the prompt's strongest features


def _positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return number


def add_parser(subparsers: Any) -> None:
    """Register ``interp features``."""
    parser = subparsers.add_parser(
        "features",
        help="write offline HTML pages for an SAE's most active features",
        description="Mine the top-activating contexts of every feature of an SAE over a text "
        "file, and write a page for each of the most active features (top contexts coloured "
        "by activation, logit table, activation histogram), an index and prompt views.",
    )
    parser.add_argument("--model", required=True, help="a shipped model name or checkpoint folder")
    parser.add_argument(
        "--sae", required=True, help="a shipped SAE name or an SAE folder (any supported format)"
    )
    parser.add_argument(
        "--data", required=True, help="a text file (.txt or .txt.gz), or tinyshakespeare"
    )
    parser.add_argument("--out", required=True, type=Path, help="the folder to write pages to")
    parser.add_argument("--n-features", type=_positive, default=50, help="pages to write")
    parser.add_argument("--k", type=_positive, default=20, help="top contexts a feature")
    parser.add_argument("--seq-len", type=_positive, help="tokens a window (default: n_ctx)")
    parser.add_argument("--max-tokens", type=_positive, help="read at most this many tokens")
    parser.add_argument("--batch-size", type=_positive, default=32, help="windows a forward")
    parser.add_argument(
        "--prompt", action="append", default=[], help="also write a prompt view (repeatable)"
    )
    add_allow_model_mismatch(parser)
    parser.set_defaults(run=run, parser=parser)


def add_allow_model_mismatch(parser: argparse.ArgumentParser) -> None:
    """``--allow-model-mismatch``: use an SAE whose config names another model."""
    parser.add_argument(
        "--allow-model-mismatch",
        action="store_true",
        help="use an --sae whose config names another model than --model (refused by "
        "default: its features mean nothing there)",
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sae`` and ``--sae-data`` for ``interp report``."""
    parser.add_argument(
        "--sae",
        help="an SAE (shipped name or folder): adds the features on each token of the prompt "
        "and a card for each of them",
    )
    parser.add_argument(
        "--sae-data",
        help="a text file (.txt or .txt.gz, or tinyshakespeare: the shipped text) whose "
        "top-activating contexts the feature cards show (default: the prompt itself)",
    )
    add_allow_model_mismatch(parser)


def read_text(path: str, max_chars: int | None = None) -> str:
    """A UTF-8 text file (gzip when it ends in .gz)."""
    file = Path(path)
    try:
        data = file.read_bytes()
        if file.suffix == ".gz":
            data = gzip.decompress(data)
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as error:
        raise UsageError(f"cannot read --data {path!r} as UTF-8 text: {error}") from error
    return text if max_chars is None else text[:max_chars]


def load_checked_sae(model: Any, name_or_path: str, allow_model_mismatch: bool = False) -> Any:
    """The SAE, checked against the model (the model it names, hook and width) before
    anything runs."""
    from interp.sae.formats import SAEFormatError
    from interp.sae.shipped import load_sae
    from interp.sae.splice import HookedSAETransformer

    try:
        sae = load_sae(name_or_path, device=model.device)
    except SAEFormatError as error:
        raise UsageError(str(error)) from error
    spliced = HookedSAETransformer.from_model(model)
    try:
        with spliced.saes([sae], allow_model_mismatch=allow_model_mismatch):
            pass
    except (KeyError, ValueError) as error:
        raise UsageError(error.args[0] if error.args else str(error)) from error
    return sae


def run(args: argparse.Namespace) -> None:
    """``interp features``: mine the data, write the pages, print where."""
    from interp.sae.features import text_windows, top_activations
    from interp.sae.views import write_feature_pages

    model = load_named_model(args.model)
    sae = load_checked_sae(model, args.sae, args.allow_model_mismatch)
    text = read_text(args.data)
    try:
        windows = text_windows(model, text, args.seq_len)
    except ValueError as error:
        raise UsageError(f"--data {args.data!r}: {error}") from error
    if args.seq_len and args.seq_len > model.cfg.n_ctx:
        raise UsageError(f"--seq-len {args.seq_len} is longer than n_ctx={model.cfg.n_ctx}.")
    if args.max_tokens:
        windows = windows[: max(1, args.max_tokens // windows.shape[1])]
    stats = top_activations(model, sae, windows, k=args.k, batch_size=args.batch_size)
    pages = write_feature_pages(
        model, sae, stats, args.out, n_features=args.n_features, prompts=args.prompt
    )
    print(terminal_text(f"{len(pages)} pages written to {args.out.resolve()}"))
    print(
        terminal_text(
            f"{stats.n_tokens} tokens; L0 {stats.l0:.2f}; dead {stats.dead_fraction:.1%}; "
            f"open {pages[0].resolve()}"
        )
    )


def report_sections(
    model: Any, prompt: str, sae_name: str, data: str | None, allow_model_mismatch: bool = False
) -> list[str]:
    """The report's SAE section: the prompt view, linking to a card for each of its
    ``MAX_REPORT_CARDS`` strongest features (``allow_model_mismatch``: use an SAE whose
    config names another model).

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sections = report_sections(model, "ROMEO:", "shakespeare-char-resid-l1", None)
        >>> len(sections), sections[0].startswith("<style>")   # one HTML section
        (1, True)
    """
    from interp.sae.features import feature_logit_weights, text_windows, top_activations
    from interp.sae.views import FEATURE_STYLE, feature_section, prompt_view
    from interp.viz.html import escape_text

    sae = load_checked_sae(model, sae_name, allow_model_mismatch)
    _, features = prompt_view(model, sae, prompt, link=lambda f: None)
    carded = features[:MAX_REPORT_CARDS]  # the strongest; the others are shown unlinked
    table, _ = prompt_view(
        model, sae, prompt, link=lambda f: f"#sae-feature-{f}" if f in carded else None
    )
    windows = text_windows(model, read_text(data), None) if data else model.to_tokens(prompt)
    stats = top_activations(model, sae, windows, k=10)
    weights = feature_logit_weights(model, sae)
    source = f"the text in {escape_text(data)}" if data else "this prompt only (add --sae-data)"
    cards = "".join(
        feature_section(model, sae, stats, f, weights, anchor=f"sae-feature-{f}") for f in carded
    )
    return [
        f"{FEATURE_STYLE}<section id='sae'><h2>SAE features</h2>"
        f"<p>{escape_text(repr(sae))}: the strongest features on each token; the "
        f"{len(carded)} strongest link to their cards below, whose top contexts come from "
        f"{source}.</p>{table}{cards}</section>"
    ]
