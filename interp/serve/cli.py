"""``interp serve``: the dashboard for the models named on the command line.

interp serve --model attn-only-2l [--model shakespeare-char] [--port 8000]
interp serve --model path/to/checkpoint --host 0.0.0.0 --token SECRET
interp serve --model shakespeare-char --sae shakespeare-char-resid-l1 --data tinyshakespeare
interp serve --model shakespeare-char --graph graphs/romeo.json   (the viewer at /graph/romeo)
"""

from __future__ import annotations

import argparse
import importlib.util
import secrets
from pathlib import Path
from typing import Any

from interp.cli.support import CommandError, UsageError, terminal_text
from interp.serve.auth import is_loopback
from interp.serve.web_stack import require_web_stack
from interp.serve.worker import MAX_TOKENS
from interp.shipped.by_name import load_named_model

DEFAULT_PORT = 8000


def add_parser(commands: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``serve`` subcommand to the ``interp`` command's subparsers."""
    serve = commands.add_parser(
        "serve",
        help="serve the live dashboard (a local web page and JSON API) for some models",
        description="Serve a web page and a JSON API (OpenAPI schema at /openapi.json) "
        "that analyse prompts on the models named here: tokens and predictions, attention "
        "heads, logit lens, direct logit attribution, head scores and activation patching. "
        "Every script is served locally; nothing is fetched from the network.",
    )
    serve.add_argument(
        "--model",
        action="append",
        required=True,
        metavar="NAME_OR_PATH",
        help="a shipped model name or a checkpoint folder; repeat for several models",
    )
    serve.add_argument(
        "--sae", action="append", default=[], metavar="PATH", help="an SAE to show features of"
    )
    serve.add_argument(
        "--allow-model-mismatch",
        action="store_true",
        help="attach an --sae whose config names another model than the one served "
        "(refused by default: its features mean nothing there)",
    )
    serve.add_argument(
        "--data",
        metavar="FILE",
        help="a text file (.txt or .txt.gz), or tinyshakespeare (the shipped text), whose "
        "top-activating contexts, density and histograms the feature browser (/features) shows "
        "for each --sae; computed once and cached on disk",
    )
    serve.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="where those statistics are cached (default: ~/.cache/interp/features)",
    )
    serve.add_argument(
        "--max-data-tokens",
        type=int,
        metavar="N",
        help="read at most this many tokens of --data",
    )
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    serve.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="port to bind (default: %(default)s)"
    )
    serve.add_argument(
        "--token",
        help="require this token on every request (required with a non-local --host; "
        "one is generated and printed if not given)",
    )
    serve.add_argument(
        "--max-tokens",
        type=int,
        default=MAX_TOKENS,
        help="the longest prompt served, in tokens (default: %(default)s, or n_ctx if less)",
    )
    serve.add_argument(
        "--graph",
        action="append",
        default=[],
        metavar="JSON",
        help="an attribution graph JSON (create_graph_files's, or interp graph --json-dir's) "
        "shown at /graph/<file name without .json>; repeat for several",
    )
    serve.set_defaults(run=run, parser=serve)
    return serve


def attach_saes(
    models: dict[str, Any], sae_paths: list[str], allow_model_mismatch: bool = False
) -> dict[str, Any]:
    """Each SAE (a shipped name or a folder) by the served model it reads: the one its config
    names (``model_name``, as ``interp.sae.model_match`` compares names), or the only model
    served when it names none, when that model names none, or with
    ``allow_model_mismatch``. A ``UsageError`` when it cannot be loaded, matches no model
    or two, or names a hook the model lacks.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> attach_saes({"shakespeare-char": chars}, ["shakespeare-char-resid-l1"])
        {'shakespeare-char': SAE(topk, d_in=128, d_sae=1024, hook='blocks.1.hook_resid_post')}
    """
    from interp.sae import load_sae
    from interp.sae.model_match import (
        ModelMismatchError,
        belongs_to,
        check_model_match,
        same_model,
    )

    saes: dict[str, Any] = {}
    for path in sae_paths:
        try:
            sae = load_sae(path)
        except (ValueError, OSError) as error:
            raise UsageError(f"--sae {path!r} cannot be loaded: {error}") from error
        wanted = sae.cfg.model_name
        targets = [
            name
            for name, model in models.items()
            if wanted and (belongs_to(sae, model) or same_model(wanted, name))
        ]
        if not targets and len(models) == 1:  # the only model: if it is not another one
            targets = list(models)
            try:
                check_model_match(sae, models[targets[0]], allow_model_mismatch, f"--sae {path!r}")
            except ModelMismatchError as error:
                raise UsageError(str(error)) from error
        if len(targets) != 1:
            raise UsageError(
                f"--sae {path!r} is for model {wanted!r}, which is not exactly one "
                f"of the models served ({', '.join(models)}); serve that model with --model."
            )
        model = models[targets[0]]
        if sae.cfg.hook_name not in model.hook_dict or targets[0] in saes:
            raise UsageError(
                f"--sae {path!r} reads {sae.cfg.hook_name!r}, which {targets[0]} has no hook "
                "point for (or that model already has an SAE); give one SAE per model."
            )
        saes[targets[0]] = sae
    return saes


def feature_indexes(
    models: dict[str, Any],
    saes: dict[str, Any],
    data: str | None,
    cache_dir: str | None,
    max_tokens: int | None,
) -> dict[str, Any]:
    """Each SAE's ``FeatureIndex`` over ``data`` (read from the cache or computed once), by
    model name; none without ``data``. A ``UsageError`` for data without an SAE, or data
    that cannot be read or is too short."""
    from interp.serve.feature_index import FeatureIndex

    if data is None:
        return {}
    if not saes:
        raise UsageError("--data gives the SAE features' dataset: add --sae NAME.")
    if max_tokens is not None and max_tokens < 1:
        raise UsageError(f"--max-data-tokens {max_tokens} must be at least 1.")
    indexes = {}
    for name, sae in saes.items():
        try:
            index = FeatureIndex.build(
                models[name], sae, data, cache_dir=cache_dir, max_tokens=max_tokens, progress=True
            )
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise UsageError(f"--data {data!r} cannot be used: {error}") from error
        how = "read from" if index.from_cache else "computed and cached in"
        print(terminal_text(f"{name}: feature statistics over {data} {how} {index.path}"))
        indexes[name] = index
    return indexes


def graph_views(paths: list[str]) -> dict[str, Any]:
    """Each ``--graph`` file as a viewer by its name (the file name without ``.json``); a
    ``UsageError`` for a file that cannot be read or two of the same name."""
    from interp.serve.graphs import graph_views as views

    slugs = [Path(path).stem for path in paths]
    if len(set(slugs)) != len(slugs):
        raise UsageError(f"--graph names two files of the same name ({paths}); rename one.")
    try:
        return views(dict(zip(slugs, paths, strict=True)))
    except ValueError as error:
        raise UsageError(f"--graph: {error}") from error


def run(args: argparse.Namespace) -> None:
    try:
        require_web_stack()
    except ImportError as error:
        raise CommandError(str(error)) from None
    import uvicorn

    from interp.serve.app import create_app
    from interp.serve.server import bind_socket

    if len(set(args.model)) != len(args.model):
        raise UsageError(f"--model names a model twice ({args.model}); name each once.")
    if args.sae and importlib.util.find_spec("interp.sae") is None:
        raise UsageError(
            "--sae needs the interp.sae package, which this installation does not have; "
            "start the server without --sae."
        )
    if not 0 <= args.port < 65536:
        raise UsageError(f"--port {args.port} is not a port number (0 to 65535).")
    if args.max_tokens < 1:
        raise UsageError(f"--max-tokens {args.max_tokens} must be at least 1.")
    token = args.token
    if token is None and not is_loopback(args.host):
        token = secrets.token_urlsafe(24)
        print(f"--host {terminal_text(args.host)} is not local: requests need this token: {token}")
    graphs = graph_views(args.graph)  # before the models load: a bad file fails at once
    models = {name: load_named_model(name) for name in args.model}
    saes = attach_saes(models, args.sae, args.allow_model_mismatch)
    indexes = feature_indexes(models, saes, args.data, args.cache_dir, args.max_data_tokens)
    app = create_app(
        models,
        token=token,
        saes=saes,
        max_tokens=args.max_tokens,
        feature_indexes=indexes,
        graphs=graphs,
    )
    try:
        sock = bind_socket(args.host, args.port)
    except OSError as error:
        raise CommandError(
            f"Cannot listen on {args.host}:{args.port} ({error}); pick another --port."
        ) from error
    port = sock.getsockname()[1]
    host = f"[{args.host}]" if ":" in args.host else args.host
    query = f"?token={token}" if token else ""
    print(terminal_text(f"interp dashboard for {', '.join(models)}: http://{host}:{port}/{query}"))
    if saes:
        print(terminal_text(f"feature browser: http://{host}:{port}/features{query}"))
    print(f"OpenAPI schema: http://{host}:{port}/openapi.json{query}   (Ctrl-C stops)")
    if graphs:
        print(terminal_text(f"graph viewer: http://{host}:{port}/graph{query} ({len(graphs)})"))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])
