"""An attribution graph in the offline viewer (``interp.viz.graph_view``): the JSON that
``create_graph_files`` writes, plus what only the graph and the model know about each
feature the JSON shows: its activation at every position of the prompt, the tokens its
decoder promotes and suppresses, and (given text) its top-activating contexts.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, batch_size=64)
    >>> import tempfile
    >>> view = graph_view(graph, replacement, node_threshold=0.8, edge_threshold=0.98)
    >>> page = view.save(f"{tempfile.mkdtemp()}/graph.html")  # one offline page
    >>> # in a notebook, `view` shows it
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Int

from interp.circuits.graph import Graph
from interp.circuits.graph_files import create_graph_files
from interp.circuits.replacement_model import ReplacementModel
from interp.sae.features.activations import text_windows
from interp.viz.graph_view import GraphView, check_graph_json, with_supernodes

FEATURE_TYPES = ("cross layer transcoder",)  # how create_graph_files names a feature node
CONTEXT_WINDOW = 128  # tokens a window of the contexts' text (at most the model's n_ctx)


def graph_json(graph: Graph, slug: str = "graph", **options: Any) -> dict[str, Any]:
    """The dict ``create_graph_files(graph, slug, folder, **options)`` writes as
    ``{slug}.json`` (``options``: ``scan``, ``node_threshold``, ``edge_threshold``,
    ``tokenizer``), written to a temporary folder and read back."""
    with tempfile.TemporaryDirectory() as folder:
        path = create_graph_files(graph, slug, folder, **options)
        return json.loads(Path(path).read_text(encoding="utf-8"))


def shown_features(data: dict[str, Any]) -> dict[int, list[int]]:
    """The features of the graph JSON's feature nodes, by layer (node ids are
    ``{layer}_{feature}_{position}``)."""
    by_layer: dict[int, set[int]] = defaultdict(set)
    for node in data["nodes"]:
        if node["feature_type"] in FEATURE_TYPES:
            layer, feature, _ = str(node["node_id"]).split("_")
            by_layer[int(layer)].add(int(feature))
    return {layer: sorted(features) for layer, features in sorted(by_layer.items())}


def prompt_activations(graph: Graph, features: dict[int, list[int]]) -> dict[str, list]:
    """Each feature's nonzero activations on the prompt, ``"{layer}_{feature}"`` ->
    [[position, value], ...], from the graph's active features."""
    wanted = {(layer, feature) for layer, fs in features.items() for feature in fs}
    found: dict[str, list] = defaultdict(list)
    rows = graph.active_features.tolist()  # [n_active, 3]: layer, position, feature
    values = graph.activation_values.tolist()  # [n_active]
    for (layer, position, feature), value in zip(rows, values, strict=True):
        if (layer, feature) in wanted:
            found[f"{layer}_{feature}"].append([position, value])
    return dict(found)


@torch.no_grad()
def decoder_logit_weights(
    model: ReplacementModel, features: dict[int, list[int]], k: int = 8
) -> dict[str, dict[str, list]]:
    """The ``k`` tokens each feature's decoder promotes and suppresses most: its output
    (summed over the layers it writes to) through the final norm's centring and weight (not
    its scale) and ``W_U``; ``"{layer}_{feature}"`` -> {promoted, suppressed}."""
    transcoders, W_U = model.transcoders, model.W_U.detach()
    k = min(k, W_U.shape[-1])
    out: dict[str, dict[str, list]] = {}
    for layer, feature_list in features.items():
        index = torch.tensor(feature_list, dtype=torch.long, device=W_U.device)
        directions = sum(
            transcoders.decoder_vectors(layer, index, target).detach()
            for target in transcoders.writes_to(layer)
        )  # [n, d_model]
        if model.cfg.normalization_type in ("LN", "LNPre"):
            directions = directions - directions.mean(-1, keepdim=True)
        weight = getattr(model.ln_final, "w", None)
        if weight is not None:
            directions = directions * weight.detach()
        logits = directions.to(W_U.dtype) @ W_U  # [n, d_vocab]
        up, down = logits.topk(k, dim=-1), logits.topk(k, dim=-1, largest=False)
        for row, feature in enumerate(feature_list):
            out[f"{layer}_{feature}"] = {
                "promoted": _named(model, up.indices[row], up.values[row]),
                "suppressed": _named(model, down.indices[row], down.values[row]),
            }
    return out


@torch.no_grad()
def transcoder_activations(
    model: ReplacementModel, tokens: Int[torch.Tensor, "batch seq"]
) -> list[torch.Tensor]:
    """Each layer's transcoder activations [batch, seq, d_transcoder] on a batch of windows
    (one forward of the unchanged model, as ``model.get_activations`` reads one prompt:
    the transcoders' input hook encoded, the first positions zeroed)."""
    n_layers = model.cfg.n_layers
    inputs: list[torch.Tensor | None] = [None] * n_layers

    def record(layer: int, activation: torch.Tensor) -> None:
        inputs[layer] = activation

    with model.transcoder_io(at_input=record):
        model.model(tokens, stop_at_layer=n_layers)
    out = []
    for layer, x in enumerate(inputs):
        acts = model.transcoders.encode(layer, x)
        acts[:, model.zero_positions] = 0
        out.append(acts)
    return out


@torch.no_grad()
def top_contexts(
    model: ReplacementModel,
    features: dict[int, list[int]],
    windows: Int[torch.Tensor, "n_windows seq"],
    k: int = 5,
    before: int = 16,
    after: int = 4,
    batch_size: int = 16,
) -> dict[str, list[dict[str, Any]]]:
    """Each feature's ``k`` strongest windows (one context a window, around its peak):
    ``"{layer}_{feature}"`` -> [{tokens, acts, index, value}, ...], strongest first, from
    the transcoders' activations (``transcoder_activations``, ``batch_size`` windows a
    forward); ``before`` / ``after`` tokens around the peak."""
    index = {layer: torch.tensor(fs, dtype=torch.long) for layer, fs in features.items()}
    acts: dict[int, list[torch.Tensor]] = {layer: [] for layer in features}
    for batch in windows.split(batch_size):
        activations = transcoder_activations(model, batch.to(model.cfg.device))
        for layer, columns in index.items():
            chosen = activations[layer][..., columns.to(activations[layer].device)]
            acts[layer].append(chosen.float().cpu())  # [batch, seq, n_features]
    decode = model.tokenizer.decode if model.tokenizer is not None else None
    out: dict[str, list[dict[str, Any]]] = {}
    for layer, feature_list in features.items():
        stacked = torch.cat(acts[layer])  # [n_windows, seq, n_features]
        peaks, where = stacked.max(dim=1)  # [n_windows, n_features]
        for column, feature in enumerate(feature_list):
            values, rows = peaks[:, column].topk(min(k, len(windows)))
            contexts = []
            for value, row in zip(values.tolist(), rows.tolist(), strict=True):
                if value <= 0:
                    break
                peak = int(where[row, column])
                start, stop = max(0, peak - before), min(windows.shape[1], peak + after + 1)
                ids = windows[row, start:stop].tolist()
                contexts.append({
                    "tokens": [decode([i]) if decode else str(i) for i in ids],
                    "acts": stacked[row, start:stop, column].tolist(),
                    "index": peak - start,
                    "value": value,
                })  # fmt: skip
            if contexts:
                out[f"{layer}_{feature}"] = contexts
    return out


def transcoder_kind(model: ReplacementModel) -> str:
    """``"cross-layer"`` when layer 0's features write to more than one layer (a CLT),
    else ``"per-layer"`` (one transcoder a layer, writing to its own layer)."""
    return "cross-layer" if len(model.transcoders.writes_to(0)) > 1 else "per-layer"


def _named(model: ReplacementModel, ids: torch.Tensor, values: torch.Tensor) -> list:
    tokenizer = model.tokenizer
    names = [tokenizer.decode([i]) if tokenizer is not None else str(i) for i in ids.tolist()]
    return [[name, value] for name, value in zip(names, values.float().tolist(), strict=True)]


def feature_extras(
    data: dict[str, Any],
    graph: Graph | None = None,
    model: ReplacementModel | None = None,
    windows: torch.Tensor | None = None,
) -> dict[str, Any]:
    """The viewer's extras for the features the graph JSON ``data`` shows: activations on
    the prompt (from ``graph``), decoder logit weights (from ``model``) and top contexts
    (from ``model`` on token ``windows`` [n, seq]); with ``model``, ``"transcoder"``: the
    kind of its transcoders (``transcoder_kind``), which the viewer names its features by."""
    features = shown_features(data)
    by_feature: dict[str, dict[str, Any]] = defaultdict(dict)
    extras: dict[str, Any] = {}
    if model is not None:  # the JSON calls every transcoder "cross layer transcoder"
        extras["transcoder"] = transcoder_kind(model)
    if graph is not None:
        for key, activations in prompt_activations(graph, features).items():
            by_feature[key]["activations"] = activations
    if model is not None:
        for key, logits in decoder_logit_weights(model, features).items():
            by_feature[key].update(logits)
    if model is not None and windows is not None:
        for key, contexts in top_contexts(model, features, windows).items():
            by_feature[key]["contexts"] = contexts
    return extras | {"features": dict(by_feature)}


def graph_view(
    graph: Graph | dict[str, Any] | str | Path,
    model: ReplacementModel | None = None,
    *,
    slug: str = "graph",
    scan: str | list[str] | None = None,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    contexts: str | Int[torch.Tensor, "n_windows seq"] | None = None,
    title: str = "",
    supernodes: dict[str, list[str]] | None = None,
) -> GraphView:
    """The viewer for ``graph``: a ``Graph`` (made into ``create_graph_files``'s JSON with
    this slug, scan and thresholds), that JSON as a dict, or the path of a ``{slug}.json``
    file. With ``model`` (the ``ReplacementModel`` that traced it), a click on a feature also
    shows the tokens its decoder promotes and suppresses, and the prompt's tokens are
    decoded by its tokenizer; with ``contexts`` too (a text, or token windows [n, seq]),
    each feature's top-activating contexts in it. ``supernodes`` (label -> node ids) are
    saved in the JSON's ``qParams`` as Neuronpedia reads them (``with_supernodes``). Display
    it in a notebook, or ``.save(path)``.

    Example:
        >>> import tempfile
        >>> from interp.circuits import ReplacementModel, attribute, create_graph_files
        >>> tcs = "shakespeare-char-transcoders"
        >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
        >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
        >>> folder = tempfile.mkdtemp()
        >>> page = graph_view(graph, replacement).save(f"{folder}/graph.html")
        >>> view = graph_view(create_graph_files(graph, "romeo", folder))  # a graph JSON file
    """
    source = graph if isinstance(graph, Graph) else None
    if source is not None:
        tokenizer = model.tokenizer if model is not None else None
        thresholds = {"node_threshold": node_threshold, "edge_threshold": edge_threshold}
        data = graph_json(source, slug, scan=scan, tokenizer=tokenizer, **thresholds)
    elif isinstance(graph, (str, Path)):
        try:
            data = json.loads(Path(graph).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise ValueError(f"Cannot read the graph JSON {str(graph)!r}: {error}") from error
    else:
        data = graph
    check_graph_json(data)
    if supernodes:
        data = with_supernodes(data, supernodes)
    if isinstance(contexts, str):
        if model is None:
            raise ValueError("contexts need the model: pass graph_view(graph, model, ...).")
        contexts = text_windows(model, contexts, min(model.cfg.n_ctx, CONTEXT_WINDOW))
    extras = None
    if source is not None or model is not None:
        extras = feature_extras(data, source, model, contexts)
    return GraphView(data, extras, title)
