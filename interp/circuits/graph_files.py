"""``create_graph_files``: a pruned attribution graph as Neuronpedia's graph JSON, the file
circuit-tracer 0.5.0's ``create_graph_files`` writes (and Neuronpedia's viewer reads).

``<output_path>/<slug>.json`` holds ``metadata`` (slug, scan, transcoder_list,
prompt_tokens, prompt, node_threshold, schema_version), ``qParams`` (the viewer's empty
state), ``nodes`` and ``links``; ``<output_path>/graph-metadata.json`` indexes every graph of
the folder (``{"graphs": [metadata, ...]}``, one entry a slug, the latest last).

Nodes are the ones ``prune_graph`` keeps, in graph order, and then only those with a kept
link (tokens and logits always stay):

- feature (layer, pos, feature): ``node_id`` ``"{layer}_{feature}_{pos}"``, ``feature`` the
  Cantor pairing of (layer, feature), ``jsNodeId`` ``"{layer}_{feature}-0"``, its
  activation, ``feature_type`` ``"cross layer transcoder"`` (for every transcoder kind);
- error (layer, pos): ``"0_{layer}_{pos}"``, ``feature`` -1, ``jsNodeId`` ``"{layer}_{pos}-0"``
  (circuit-tracer's ids, which can equal a feature's id);
- token at pos: ``"E_{token_id}_{pos}"``, ``feature`` pos, ``layer`` ``"E"``;
- logit target i: ``"{n_layers + 1}_{token_id}_{last pos}"``, its probability and a
  ``clerp`` ``'Output "<token>" (p=0.123)'``; the first target is ``is_target_logit``.

``influence`` is the node's cumulative influence score (``prune_graph``'s third result; none
for logits). Links are the kept edges, ordered by target then source (graph order), with
the adjacency entry as ``weight``.

Where the bytes differ from circuit-tracer's (values and order do not): numbers are written
by Python's ``json`` (``1e-05``, not pydantic's ``0.00001``), non-finite numbers as ``null``
as pydantic does; a list of transcoder names as ``scan`` is named ``custom-<hash>`` with a
stable hash (circuit-tracer's is Python's ``hash()``, different in every process).

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, batch_size=64)
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> path = create_graph_files(graph, "romeo", folder, tokenizer=replacement.tokenizer)
    >>> json.loads(Path(folder, "romeo.json").read_text())["nodes"][0]["node_id"]
    '..._..._...'
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp.circuits.graph import Graph, prune_graph
from interp.circuits.sparse_graph import edges_of, values_at

SCHEMA_VERSION = 1
QPARAMS = {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "", "sg_pos": ""}


def _number(value: Any) -> float | None:
    """A JSON number (None for NaN and infinities, which pydantic writes as null)."""
    value = float(value)
    return value if math.isfinite(value) else None


def cantor_pairing(x: int, y: int) -> int:
    """A unique non-negative integer for two non-negative integers (a feature's ``feature``)."""
    return (x + y) * (x + y + 1) // 2 + y


def _node(node_id: str, feature: int, layer: str, pos: int, kind: str, js_id: str, **extra):
    node = {
        "node_id": node_id,
        "feature": feature,
        "layer": layer,
        "ctx_idx": pos,
        "feature_type": kind,
        "token_prob": 0.0,
        "is_target_logit": False,
        "run_idx": 0,
        "reverse_ctx_idx": 0,
        "jsNodeId": js_id,
        "clerp": "",
        "influence": None,
        "activation": None,
    }
    node.update(extra)
    return node


def create_nodes(graph: Graph, node_mask: Tensor, cumulative_scores: Tensor) -> dict[int, dict]:
    """The JSON node of every kept node, by its index in the graph."""
    n_features = len(graph.selected_features)
    error_end = n_features + graph.n_pos * graph.n_layers
    token_end = error_end + graph.n_pos
    nodes = {}
    for index in node_mask.nonzero().flatten().tolist():
        influence = _number(cumulative_scores[index])
        if index < n_features:
            active = int(graph.selected_features[index])
            layer, pos, feature = graph.active_features[active].tolist()
            nodes[index] = _node(
                f"{layer}_{feature}_{pos}", cantor_pairing(layer, feature), str(layer), pos,
                "cross layer transcoder", f"{layer}_{feature}-0", influence=influence,
                activation=_number(graph.activation_values[active]),
            )  # fmt: skip
        elif index < error_end:
            layer, pos = divmod(index - n_features, graph.n_pos)
            nodes[index] = _node(
                f"0_{layer}_{pos}", -1, str(layer), pos, "mlp reconstruction error",
                f"{layer}_{pos}-0", influence=influence,
            )  # fmt: skip
        elif index < token_end:
            pos = index - error_end
            token = int(graph.input_tokens[pos])
            nodes[index] = _node(
                f"E_{token}_{pos}", pos, "E", pos, "embedding", f"E_{token}-{pos}",
                influence=influence,
            )  # fmt: skip
        else:
            target = index - token_end
            text, vocab_idx = graph.logit_targets[target]
            prob = float(graph.logit_probabilities[target])
            layer, pos = str(graph.n_layers + 1), graph.n_pos - 1
            nodes[index] = _node(
                f"{layer}_{vocab_idx}_{pos}", vocab_idx, layer, pos, "logit",
                f"L_{vocab_idx}-{pos}", token_prob=_number(prob), is_target_logit=target == 0,
                clerp=f'Output "{text}" (p={prob:.3f})',
            )  # fmt: skip
    return nodes


def create_links(
    graph: Graph, nodes: dict[int, dict], edge_mask: Tensor
) -> tuple[list[dict], list[dict]]:
    """(nodes, links): the kept edges between kept nodes, by target then source, and the
    nodes some link touches (plus every token and logit)."""
    adjacency = graph.adjacency_matrix
    if edge_mask.layout != torch.strided:  # a sparse graph's: its stored kept edges
        targets, sources = edges_of(edge_mask.to(adjacency.device))[:2]
    else:
        targets, sources = edge_mask.to(adjacency.device).nonzero(as_tuple=True)
    if adjacency.layout != torch.strided:
        weights = values_at(adjacency, targets, sources).tolist()
    else:
        weights = adjacency[targets, sources].tolist()
    links = [
        {"source": nodes[s]["node_id"], "target": nodes[t]["node_id"], "weight": _number(w)}
        for s, t, w in zip(sources.tolist(), targets.tolist(), weights, strict=True)
        if s in nodes and t in nodes
    ]
    linked = {link["source"] for link in links} | {link["target"] for link in links}
    used = [
        node
        for node in nodes.values()
        if node["node_id"] in linked or node["feature_type"] in ("embedding", "logit")
    ]
    return used, links


def _token_decoder(graph: Graph, tokenizer: Any) -> Callable[[int], str]:
    """How one token id becomes text: ``tokenizer.decode``, else the tokenizer of the model
    the graph was traced on (``graph.tokenizer``), else the one ``graph.cfg`` names (as
    circuit-tracer), else the id's digits for a model without one (as ``attribute`` writes
    ``input_string``)."""
    if tokenizer is None:
        tokenizer = getattr(graph, "tokenizer", None)
    if tokenizer is None:
        name = getattr(graph.cfg, "tokenizer_name", None)
        if not name:
            return str
        from interp.tokenizers import get_tokenizer

        try:
            tokenizer = get_tokenizer(name)
        except ValueError:
            try:
                from transformers import AutoTokenizer

                tokenizer = AutoTokenizer.from_pretrained(name)
            except Exception as error:
                raise ValueError(
                    f"The graph's model names tokenizer {name!r}, which could not be loaded "
                    f"({type(error).__name__}); pass tokenizer=model.tokenizer."
                ) from None
    if not hasattr(tokenizer, "decode"):
        raise TypeError(f"tokenizer must have a decode method; got {type(tokenizer).__name__}.")
    return lambda token: tokenizer.decode([token])


def _scan_fields(scan: str | list[str]) -> tuple[str, list[str]]:
    if isinstance(scan, str):
        return scan, []
    names = [str(name) for name in scan]
    digest = hashlib.sha256("-".join(names).encode()).digest()[:8]
    return f"custom-{int.from_bytes(digest, 'big', signed=True)}", names


def add_graph_metadata(metadata: dict, folder: Path) -> None:
    """Add (or replace, by slug) ``metadata`` in ``folder/graph-metadata.json``."""
    path = folder / "graph-metadata.json"
    index = json.loads(path.read_text()) if path.exists() else {"graphs": []}
    index["graphs"] = [g for g in index["graphs"] if g["slug"] != metadata["slug"]]
    index["graphs"].append(metadata)
    path.write_text(json.dumps(index, indent=2))


def create_graph_files(
    graph_or_path: Graph | str | Path,
    slug: str,
    output_path: str | Path,
    scan: str | list[str] | None = None,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    *,
    tokenizer: Any = None,
) -> Path:
    """Prune ``graph_or_path`` (a ``Graph`` or a ``Graph.to_pt`` file) with the thresholds
    and write ``<output_path>/<slug>.json`` and the folder's ``graph-metadata.json`` (see
    the module docstring). ``scan`` defaults to the graph's (its transcoders' name);
    ``tokenizer`` decodes the prompt's tokens (by default the traced model's, which
    ``attribute`` keeps on the graph, or the one its config names). Returns the path of the
    graph's file."""
    graph = graph_or_path if isinstance(graph_or_path, Graph) else Graph.from_pt(graph_or_path)
    if not isinstance(slug, str) or not slug or "/" in slug or "\\" in slug or slug in {".", ".."}:
        raise ValueError(f"slug={slug!r}: it must be a non-empty file name (no '/').")
    folder = Path(output_path)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"output_path {str(folder)!r} is a file; give a folder.")
    scan = graph.scan if scan is None else scan
    if scan is None:
        raise ValueError(
            "Neither scan nor graph.scan is set: pass scan=<name of the transcoders> so the "
            "graph says which transcoders made it."
        )
    decode = _token_decoder(graph, tokenizer)
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold, edge_threshold)
    nodes = create_nodes(graph, node_mask.cpu(), cumulative.cpu())
    used_nodes, links = create_links(graph, nodes, edge_mask)
    scan_name, transcoder_list = _scan_fields(scan)
    metadata = {
        "slug": slug,
        "scan": scan_name,
        "transcoder_list": transcoder_list,
        "prompt_tokens": [decode(int(token)) for token in graph.input_tokens],
        "prompt": graph.input_string,
        "node_threshold": float(node_threshold),
        "schema_version": SCHEMA_VERSION,
    }
    document = {"metadata": metadata, "qParams": QPARAMS, "nodes": used_nodes, "links": links}
    if getattr(graph, "attention", None) is not None:  # annotate_attention's; optional field
        kept = {(link["source"], link["target"]) for link in links}
        document["attention"] = graph.attention.to_json(graph, kept)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{slug}.json"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False), encoding="utf-8")
    add_graph_metadata(metadata, folder)
    return path
