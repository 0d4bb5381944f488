"""Attention annotations saved with a graph: the head loadings of its kept edges and the QK
attributions of the heads that carry them, for ``Graph.to_pt`` and the graph JSON.

``annotate_attention(model, graph)`` prunes the graph as ``create_graph_files`` does (same
thresholds), computes the head loadings of every kept edge (one batched backward pass per
kept target) and, for each edge's strongest heads, the QK attribution at (the target's
position, the source's position); it sets ``graph.attention``. ``Graph.to_pt`` saves it
(``from_pt`` reads it back) and ``create_graph_files`` writes it as the JSON's optional
top-level ``"attention"`` field (which Neuronpedia ignores): ``to_json`` below.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
    >>> annotations = annotate_attention(replacement, graph, max_qk=4)
    >>> annotations.heads.shape[1:]   # [edges, n_layers, n_heads]
    torch.Size([4, 4])
    >>> graph.attention is annotations
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.circuits.attention.frozen import FrozenRun, check_pair
from interp.circuits.attention.head_loadings import RULE, _check_unsupported, target_rows
from interp.circuits.attention.qk_attribution import QKAttribution, _check_call, qk_attribution
from interp.circuits.graph import Graph, prune_graph
from interp.circuits.replacement_model import ReplacementModel
from interp.circuits.sparse_graph import edges_of, entries, is_sparse

SCHEMA_VERSION = 1


@dataclass
class AttentionAnnotations:
    """Head loadings of ``len(targets)`` edges (``heads`` [edges, n_layers, n_heads],
    ``bypass`` [edges]; ``targets``/``sources`` graph node indices) and QK attributions."""

    targets: Int[Tensor, " edges"]
    sources: Int[Tensor, " edges"]
    heads: Float[Tensor, "edges n_layers n_heads"]
    bypass: Float[Tensor, " edges"]
    qk: list[QKAttribution] = field(default_factory=list)
    rule: str = RULE

    def to_state(self) -> dict[str, Any]:
        """Plain tensors and lists, for ``torch.save``."""
        state = {name: getattr(self, name) for name in ("targets", "sources", "heads", "bypass")}
        state["rule"], state["qk"] = self.rule, [vars(qk).copy() for qk in self.qk]
        return state

    @staticmethod
    def from_state(state: dict[str, Any]) -> AttentionAnnotations:
        qk = [QKAttribution(**entry) for entry in state.get("qk", [])]
        return AttentionAnnotations(
            state["targets"], state["sources"], state["heads"], state["bypass"], qk,
            state.get("rule", RULE),
        )  # fmt: skip

    def to_json(
        self, graph: Graph, links: set[tuple[str, str]] | None = None, top: int = 8
    ) -> dict[str, Any]:
        """The graph JSON's ``"attention"`` field: the loadings of the edges among ``links``
        ((source id, target id); all when None), the ``top`` heads of each and the ``top``
        pairs of each QK attribution (the rest summed in ``"other"``)."""
        ids = node_ids(graph)
        edge_weights = entries(graph.adjacency_matrix, self.targets, self.sources)
        loadings = []
        pairs = zip(self.targets.tolist(), self.sources.tolist(), strict=True)
        for i, (target, source) in enumerate(pairs):
            if links is not None and (ids[source], ids[target]) not in links:
                continue
            heads = self.heads[i]
            flat = heads.flatten()
            order = [j for j in flat.abs().argsort(descending=True)[:top].tolist() if flat[j] != 0]
            n_heads = heads.shape[1]
            listed = [[j // n_heads, j % n_heads, _number(flat[j])] for j in order]
            loadings.append({
                "source": ids[source], "target": ids[target],
                "weight": _number(edge_weights[i]),
                "bypass": _number(self.bypass[i]),
                "heads": listed, "other": _number(flat.sum() - sum(flat[j] for j in order)),
            })  # fmt: skip
        return {
            "schema_version": SCHEMA_VERSION,
            "rule": self.rule,
            "n_layers": int(self.heads.shape[1]),
            "n_heads": int(self.heads.shape[2]),
            "head_loadings": loadings,
            "qk": [_qk_json(qk, ids, top) for qk in self.qk],
        }


def _number(value: Any) -> float | None:
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


def node_ids(graph: Graph) -> list[str]:
    """Every node's ``node_id`` as ``create_graph_files`` writes it."""
    n_pos, n_layers = graph.n_pos, graph.n_layers
    ids = []
    for active in graph.selected_features.tolist():
        layer, pos, feature = graph.active_features[active].tolist()
        ids.append(f"{layer}_{feature}_{pos}")
    ids += [f"0_{layer}_{pos}" for layer in range(n_layers) for pos in range(n_pos)]
    ids += [f"E_{int(token)}_{pos}" for pos, token in enumerate(graph.input_tokens.tolist())]
    ids += [f"{n_layers + 1}_{target.vocab_idx}_{n_pos - 1}" for target in graph.logit_targets]
    return ids


def _qk_json(qk: QKAttribution, ids: list[str], top: int) -> dict[str, Any]:
    flat = qk.pairs.flatten()
    n_key = qk.pairs.shape[1]
    order = flat.abs().argsort(descending=True)[:top].tolist()
    query_rows: dict[int, int] = {}
    key_rows: dict[int, int] = {}
    pairs = []
    for j in order:
        i, k = divmod(j, n_key)
        qi = query_rows.setdefault(i, len(query_rows))
        ki = key_rows.setdefault(k, len(key_rows))
        pairs.append([qi, ki, _number(flat[j])])

    def rows(used: dict[int, int], nodes: list, labels: list[str]) -> list[dict[str, Any]]:
        return [
            {"node_id": ids[nodes[i]] if isinstance(nodes[i], int) else None, "label": labels[i]}
            for i in used
        ]

    return {
        "layer": qk.layer, "head": qk.head, "query_pos": qk.query_pos, "key_pos": qk.key_pos,
        "score": _number(qk.score),
        "capped_score": None if qk.capped_score is None else _number(qk.capped_score),
        "pattern": _number(qk.pattern), "remainder": _number(qk.remainder),
        "query_rows": rows(query_rows, qk.query_nodes, qk.query_labels),
        "key_rows": rows(key_rows, qk.key_nodes, qk.key_labels),
        "pairs": pairs, "other": _number(flat.sum() - sum(flat[j] for j in order)),
    }  # fmt: skip


def _qk_candidates(
    run: FrozenRun, annotations: AttentionAnnotations, qk_per_edge: int, min_share: float
) -> list[tuple[int, int, int, int]]:
    """(layer, head, query pos, key pos) of each edge's strongest heads, strongest edges first."""
    edges = annotations.heads.sum((1, 2)) + annotations.bypass
    order = edges.abs().argsort(descending=True).tolist()
    seen: dict[tuple[int, int, int, int], None] = {}
    n_heads = annotations.heads.shape[2]
    for i in order:
        heads = annotations.heads[i].flatten()
        q = run.position(int(annotations.targets[i]))
        k = run.position(int(annotations.sources[i]))
        for j in heads.abs().argsort(descending=True)[:qk_per_edge].tolist():
            if abs(float(heads[j])) < min_share * abs(float(edges[i])) or heads[j] == 0:
                break
            candidate = (j // n_heads, j % n_heads, q, k)
            try:
                _check_call(run, *candidate)
            except ValueError:  # a key the head cannot attend to
                continue
            seen.setdefault(candidate, None)
    return list(seen)


def annotate_attention(
    model: ReplacementModel,
    graph: Graph,
    node_threshold: float = 0.8,
    edge_threshold: float = 0.98,
    *,
    qk_per_edge: int = 2,
    min_share: float = 0.1,
    max_qk: int = 64,
) -> AttentionAnnotations:
    """Annotate the edges ``prune_graph(graph, node_threshold, edge_threshold)`` keeps (see
    the module docstring) and set ``graph.attention``. ``qk_per_edge`` heads of each edge
    (those carrying at least ``min_share`` of its weight) get a QK attribution at (target
    position, source position), at most ``max_qk`` in all, from the strongest edges."""
    check_pair(model, graph, "annotate_attention")
    _check_unsupported(model)
    run = FrozenRun(model, graph)
    node_mask, edge_mask, _ = prune_graph(graph, node_threshold, edge_threshold)
    if is_sparse(edge_mask):  # a graph traced with sparse_threshold
        kept = edges_of(edge_mask.cpu())
        targets, sources = kept.targets[kept.values], kept.sources[kept.values]
    else:
        targets, sources = edge_mask.cpu().nonzero(as_tuple=True)
    node_mask = node_mask.cpu()
    both_kept = node_mask[targets] & node_mask[sources]
    targets, sources = targets[both_kept], sources[both_kept]
    heads = torch.zeros(len(targets), run.n_layers, run.n_heads, dtype=run.dtype)
    bypass = torch.zeros(len(targets), dtype=run.dtype)
    for target in targets.unique().tolist():
        rows = (targets == target).nonzero().flatten()
        target_bypass, target_heads = target_rows(model, run, target)
        heads[rows] = target_heads[..., sources[rows]].permute(2, 0, 1)
        bypass[rows] = target_bypass[sources[rows]]
    annotations = AttentionAnnotations(targets, sources, heads, bypass)
    for layer, head, q, k in _qk_candidates(run, annotations, qk_per_edge, min_share)[:max_qk]:
        annotations.qk.append(qk_attribution(model, graph, layer, head, q, k, frozen_run=run))
    graph.attention = annotations
    return annotations
