"""The attribution graph (circuit-tracer's ``Graph``), its pruning and its scores.

Nodes, in order: the selected features (in active-feature order), one error node per layer
and position (``layer * n_pos + pos``), one token node per position, then the logit targets.
``adjacency_matrix[target, source]`` is the direct effect of ``source`` on ``target``.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, batch_size=64)
    >>> node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8)
    >>> node_mask.shape, edge_mask.shape   # [nodes], [nodes, nodes]
    (torch.Size([232]), torch.Size([232, 232]))
    >>> replacement_score, completeness_score = compute_graph_scores(graph)
    >>> 0 <= replacement_score <= completeness_score <= 1
    True
"""

from __future__ import annotations

import numbers
import pickle
from pathlib import Path
from types import SimpleNamespace
from typing import Any, NamedTuple

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from interp.circuits.sparse_graph import (
    prune_sparse,
    sparse_edge_influence,
    sparse_node_influence,
    sparse_scores,
)


class LogitTarget(NamedTuple):
    """One output node: the token's text and its vocabulary index."""

    token_str: str
    vocab_idx: int


class ForeignConfig:
    """A model config pickled by circuit-tracer or TransformerLens (``UnifiedConfig``,
    ``HookedTransformerConfig``), read back as its attributes (``n_layers``, ``d_vocab``,
    ``model_name``, ``tokenizer_name``, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Pickle rebuilds a dataclass without calling this and then sets its __dict__; an
        # object pickled by a constructor call (args, kwargs) keeps only its named fields.
        self.__dict__.update(kwargs)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items() if k in _CONFIG_SHOWN)
        return f"ForeignConfig({fields})"


_CONFIG_SHOWN = ("model_name", "n_layers", "d_model", "d_vocab")


class _GraphUnpickler(pickle.Unpickler):
    """Unpickles circuit-tracer's graphs with interp's classes in place of theirs."""

    def find_class(self, module: str, name: str) -> Any:
        if module.split(".")[0] in ("circuit_tracer", "transformer_lens"):
            return LogitTarget if name == "LogitTarget" else ForeignConfig
        return super().find_class(module, name)


# The fields a saved graph must have (circuit-tracer's; to_pt writes vocab_size and scan too).
_SAVED_FIELDS = (
    "input_string", "input_tokens", "active_features", "adjacency_matrix", "cfg",
    "selected_features", "activation_values", "logit_targets", "logit_probabilities",
)  # fmt: skip
_graph_pickle = SimpleNamespace(Unpickler=_GraphUnpickler, load=pickle.load, __name__="pickle")


class Graph:
    """An attribution graph, with circuit-tracer's fields (see the module docstring)."""

    def __init__(
        self,
        input_string: str,
        input_tokens: Int[Tensor, " pos"],
        active_features: Int[Tensor, "n_active 3"],
        adjacency_matrix: Float[Tensor, "nodes nodes"],
        cfg: Any,
        selected_features: Int[Tensor, " n_selected"],
        activation_values: Float[Tensor, " n_active"],
        logit_targets: list[LogitTarget],
        logit_probabilities: Float[Tensor, " n_logits"],
        scan: str | list[str] | None = None,
        vocab_size: int | None = None,
        tokenizer: Any = None,
    ) -> None:
        self.input_string = input_string
        self.input_tokens = input_tokens
        self.active_features = active_features
        self.adjacency_matrix = adjacency_matrix
        self.cfg = cfg
        self.selected_features = selected_features
        self.activation_values = activation_values
        self.logit_targets = [LogitTarget(*target) for target in logit_targets]
        self.logit_probabilities = logit_probabilities
        self.scan = scan
        self.vocab_size = vocab_size if vocab_size is not None else cfg.d_vocab
        self.n_pos = len(input_tokens)
        # The model's tokenizer, which create_graph_files decodes the prompt with (attribute
        # sets it; not saved by to_pt, so a loaded graph decodes with cfg.tokenizer_name's).
        self.tokenizer = tokenizer
        # Head loadings and QK attributions (interp.circuits.attention.annotate_attention),
        # saved by to_pt and written by create_graph_files when set.
        self.attention: Any = None

    @property
    def n_layers(self) -> int:
        return self.cfg.n_layers

    @property
    def logit_token_ids(self) -> Int[Tensor, " n_logits"]:
        return torch.tensor([target.vocab_idx for target in self.logit_targets], dtype=torch.long)

    def to(self, device: str | torch.device) -> Graph:
        self.adjacency_matrix = self.adjacency_matrix.to(device)
        self.active_features = self.active_features.to(device)
        self.logit_probabilities = self.logit_probabilities.to(device)
        return self

    def to_pt(self, path: str | Path) -> None:
        """Save the graph (``Graph.from_pt`` reads it back)."""
        state = {name: getattr(self, name) for name in _SAVED_FIELDS}
        state["logit_targets"] = [tuple(target) for target in self.logit_targets]
        state["vocab_size"], state["scan"] = self.vocab_size, self.scan
        if self.attention is not None:
            state["attention"] = self.attention.to_state()
        torch.save(state, path)

    @staticmethod
    def from_pt(path: str | Path, map_location: str | torch.device = "cpu") -> Graph:
        """Read a graph ``to_pt`` saved, or circuit-tracer's ``Graph.to_pt`` (its
        ``LogitTarget`` becomes ours, its config a ``ForeignConfig``; neither circuit-tracer
        nor TransformerLens is imported)."""
        try:
            state = torch.load(
                path, weights_only=False, map_location=map_location, pickle_module=_graph_pickle
            )
        except (pickle.UnpicklingError, RuntimeError, EOFError) as error:
            raise ValueError(f"{path} is not a saved graph (Graph.to_pt): {error}") from None
        missing = set(_SAVED_FIELDS) - set(state) if isinstance(state, dict) else _SAVED_FIELDS
        if missing:
            raise ValueError(
                f"{path} is not a saved graph (Graph.to_pt): it lacks {sorted(missing)}."
            )
        if isinstance(state.get("logit_targets"), Tensor):  # circuit-tracer's older files
            state["logit_targets"] = [LogitTarget("", int(i)) for i in state["logit_targets"]]
        attention = state.pop("attention", None)
        graph = Graph(**state)
        if attention is not None:
            from interp.circuits.attention.annotations import AttentionAnnotations

            graph.attention = AttentionAnnotations.from_state(attention)
        return graph

    def __repr__(self) -> str:
        return (
            f"Graph({len(self.selected_features)} of {len(self.active_features)} features, "
            f"{self.n_pos} positions, {len(self.logit_targets)} logits)"
        )


def normalize_matrix(matrix: Float[Tensor, "rows cols"]) -> Float[Tensor, "rows cols"]:
    """Absolute values, each row divided by its sum (rows of zeros stay zero)."""
    absolute = matrix.abs()
    return absolute / absolute.sum(dim=1, keepdim=True).clamp(min=1e-10)


def compute_influence(
    matrix: Float[Tensor, "n n"], logit_weights: Float[Tensor, " n"], max_iter: int = 1000
) -> Float[Tensor, " n"]:
    """``w A + w A^2 + ...`` (the graph is acyclic, so the series ends)."""
    current = logit_weights @ matrix
    influence = current
    for _ in range(max_iter):
        if not current.any():
            return influence
        current = current @ matrix
        influence += current
    raise RuntimeError(f"Influence did not converge in {max_iter} steps: is the graph cyclic?")


def compute_node_influence(
    adjacency_matrix: Float[Tensor, "n n"], logit_weights: Float[Tensor, " n"]
) -> Float[Tensor, " n"]:
    """Each node's influence on the weighted logits, through the row-normalised graph (a
    sparse matrix gives the same, by sparse products: ``sparse_graph``)."""
    if adjacency_matrix.layout != torch.strided:
        return sparse_node_influence(adjacency_matrix, logit_weights)
    return compute_influence(normalize_matrix(adjacency_matrix), logit_weights)


def compute_edge_influence(
    pruned_matrix: Float[Tensor, "n n"], logit_weights: Float[Tensor, " n"]
) -> Float[Tensor, "n n"]:
    """Each edge's score: its share of its target's inputs times the target's influence on
    the weighted logits (the logits' own weights included); sparse in, sparse out."""
    if pruned_matrix.layout != torch.strided:
        return sparse_edge_influence(pruned_matrix, logit_weights)
    normalized = normalize_matrix(pruned_matrix)
    influence = compute_influence(normalized, logit_weights) + logit_weights
    return normalized * influence[:, None]


def _logit_weights(graph: Graph) -> Float[Tensor, " n"]:
    weights = torch.zeros(graph.adjacency_matrix.shape[0], device=graph.adjacency_matrix.device)
    weights[-len(graph.logit_targets) :] = graph.logit_probabilities
    return weights


def _threshold(scores: Float[Tensor, " n"], fraction: float) -> Tensor:
    """The smallest score among the top ones that hold ``fraction`` of the total."""
    ordered = torch.sort(scores, descending=True).values
    cumulative = torch.cumsum(ordered, dim=0) / torch.sum(ordered)
    index = min(int(torch.searchsorted(cumulative, fraction).item()), len(cumulative) - 1)
    return ordered[index]


def _check_graph(graph: Any, function: str) -> None:
    if not isinstance(graph, Graph):
        raise TypeError(
            f"{function} takes a Graph (from attribute(...) or Graph.from_pt(path)); got "
            f"{type(graph).__name__}."
        )


class PruneResult(NamedTuple):
    node_mask: Bool[Tensor, " n"]
    edge_mask: Bool[Tensor, "n n"]  # a sparse boolean matrix for a sparse graph
    cumulative_scores: Float[Tensor, " n"]


def prune_graph(
    graph: Graph, node_threshold: float = 0.8, edge_threshold: float = 0.98
) -> PruneResult:
    """Keep the nodes, then the edges, that carry ``node_threshold`` / ``edge_threshold`` of
    the influence on the logits; tokens and logits are always kept, and features or errors
    left without outgoing (features: or incoming) edges are dropped until none is. A
    sparse graph (``attribute(..., sparse_threshold=...)``) is pruned on its stored edges,
    and its ``edge_mask`` is a sparse boolean matrix (``sparse_graph.prune_sparse``)."""
    _check_graph(graph, "prune_graph")
    for name, value in (("node_threshold", node_threshold), ("edge_threshold", edge_threshold)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 <= value <= 1:
            raise ValueError(f"{name}={value!r}; it must be a number between 0.0 and 1.0.")
    n_kept_always = len(graph.logit_targets) + graph.n_pos  # tokens and logits
    n_features = len(graph.selected_features)
    weights = _logit_weights(graph)
    if graph.adjacency_matrix.layout != torch.strided:
        thresholds = (node_threshold, edge_threshold)
        args = (graph.adjacency_matrix, weights, n_features, n_kept_always, *thresholds)
        return PruneResult(*prune_sparse(*args))
    node_influence = compute_node_influence(graph.adjacency_matrix, weights)
    node_mask = node_influence >= _threshold(node_influence, node_threshold)
    node_mask[-n_kept_always:] = True

    pruned = graph.adjacency_matrix.clone()
    pruned[~node_mask] = 0
    pruned[:, ~node_mask] = 0
    edge_scores = compute_edge_influence(pruned, weights)
    edge_mask = edge_scores >= _threshold(edge_scores.flatten(), edge_threshold)

    previous = None
    while previous is None or not torch.equal(node_mask, previous):
        previous = node_mask.clone()
        edge_mask[~node_mask] = False
        edge_mask[:, ~node_mask] = False
        node_mask[:-n_kept_always] &= edge_mask[:, :-n_kept_always].any(0)  # has a target
        node_mask[:n_features] &= edge_mask[:n_features].any(1)  # has a source
    ordered, order = torch.sort(node_influence, descending=True)
    cumulative = torch.zeros_like(node_influence)
    cumulative[order] = torch.cumsum(ordered, dim=0) / torch.sum(ordered)
    return PruneResult(node_mask, edge_mask, cumulative)


def compute_graph_scores(graph: Graph) -> tuple[float, float]:
    """(replacement score, completeness score): the share of the tokens' influence on the
    logits that does not pass through error nodes, and the influence-weighted share of every
    node's inputs that come from features or tokens rather than errors."""
    _check_graph(graph, "compute_graph_scores")
    error_start = len(graph.selected_features)
    error_end = error_start + graph.n_pos * graph.n_layers
    token_end = error_end + graph.n_pos
    weights = _logit_weights(graph)
    if graph.adjacency_matrix.layout != torch.strided:  # sparse: on its stored edges
        influence, error_share = sparse_scores(
            graph.adjacency_matrix, weights, error_start, error_end
        )
    else:
        normalized = normalize_matrix(graph.adjacency_matrix)
        influence = compute_influence(normalized, weights)
        error_share = normalized[:, error_start:error_end].sum(dim=-1)
    token_influence = influence[error_end:token_end].sum()
    error_influence = influence[error_start:error_end].sum()
    replacement = token_influence / (token_influence + error_influence)
    non_error = 1 - error_share
    output_influence = influence + weights
    completeness = (non_error * output_influence).sum() / output_influence.sum()
    return replacement.item(), completeness.item()


def compute_partial_influences(
    edge_rows: Float[Tensor, "rows nodes"],
    logit_probabilities: Float[Tensor, " n_logits"],
    row_to_node: Int[Tensor, " rows"],
    max_iter: int = 128,
) -> Float[Tensor, " nodes"]:
    """Every node's influence on the logits through the rows computed so far (each row is
    the node ``row_to_node[row]``); ranks which features to visit next."""
    normalized = edge_rows.abs()
    normalized /= normalized.sum(dim=1, keepdim=True).clamp(min=1e-8)
    influence = edge_rows.new_zeros(edge_rows.shape[1])  # float64 graphs stay float64
    current = edge_rows.new_zeros(edge_rows.shape[1])
    current[-len(logit_probabilities) :] = logit_probabilities
    for _ in range(max_iter):
        current = current[row_to_node] @ normalized
        if not current.any():
            return influence
        influence += current
    raise RuntimeError(f"Partial influences did not converge in {max_iter} steps.")
