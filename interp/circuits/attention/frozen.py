"""The frozen run of a graph's prompt, again: what head loadings and QK attributions read.

``attribute`` keeps only the adjacency matrix; explaining attention needs what it computed
on the way (the frozen patterns and norm scales, the sources' vectors) and a little more
(each head's output, the queries and keys). ``FrozenRun`` reruns the prompt once through
``ReplacementModel.linearized()``, finds the same active features (checked against the
graph's, so a graph and a model that do not belong together are refused) and maps the
graph's node indices to the rows ``attribute`` computed.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
    >>> run = FrozenRun(replacement, graph)
    >>> run.kind(0), run.kind(len(graph.selected_features))   # node 0; the first error node
    ('feature', 'error')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.circuits.attribution.sources import _find_sources, _Sources
from interp.circuits.backward import FrozenBackward
from interp.circuits.graph import Graph
from interp.circuits.replacement_model import LinearizedRun, ReplacementModel

# What the run records besides LinearizedRun's, by hook name suffix (values only).
RECORDED = ("hook_embed", "hook_pos_embed", "attn.hook_z", "hook_resid_pre", "attn.hook_pattern")


def check_pair(model: Any, graph: Any, function: str) -> None:
    """``model`` a ReplacementModel and ``graph`` a Graph, else a TypeError naming both;
    a tensor-parallel model is a ValueError (its per-head weights are split)."""
    if not isinstance(model, ReplacementModel):
        raise TypeError(
            f"{function} takes the ReplacementModel the graph was traced with; got "
            f"{type(model).__name__}."
        )
    if not isinstance(graph, Graph):
        raise TypeError(
            f"{function} takes a Graph (from attribute(...) or Graph.from_pt(path)); got "
            f"{type(graph).__name__}."
        )
    if getattr(model.model, "tp", None) is not None:
        raise ValueError(
            f"{function} reads per-head weights whole, which a tensor-parallel model "
            "(tp_size > 1) splits over its ranks: it is not covered there. Save the graph "
            "(graph.to_pt) and run it on the model loaded in one process."
        )


class FrozenRun:
    """One frozen forward of ``graph``'s prompt in ``model`` (see the module docstring).

    Attributes: ``tokens`` [pos]; ``run`` (the ``LinearizedRun``: frozen patterns and
    scales by hook name, transcoder inputs and outputs); ``sources`` (what ``attribute``
    found: active features, their vectors, errors, token embeddings); ``recorded`` (hook
    name -> value [pos, ...] for ``RECORDED`` and the queries/keys of every layer);
    ``graph_columns`` [nodes - n_logits]: the column of ``attribute``'s rows that each
    graph node (features, errors, tokens) reads.
    """

    def __init__(self, model: ReplacementModel, graph: Graph) -> None:
        check_pair(model, graph, type(self).__name__)
        self.model, self.graph = model, graph
        cfg = model.cfg
        if graph.n_layers != cfg.n_layers or graph.vocab_size < cfg.d_vocab:
            raise ValueError(
                f"The graph has {graph.n_layers} layers and vocabulary {graph.vocab_size}; the "
                f"model {cfg.n_layers} and {cfg.d_vocab}: pass the model it was traced with."
            )
        self.tokens = graph.input_tokens.to(cfg.device)
        self.n_pos, self.n_layers, self.n_heads = len(self.tokens), cfg.n_layers, cfg.n_heads
        self.dtype = torch.promote_types(torch.float32, cfg.dtype)
        self.recorded: dict[str, Tensor] = {}
        self._backward: FrozenBackward | None = None
        handles = self._qk_norm_hooks()
        try:
            with torch.no_grad(), model.linearized() as run, model.model.hooks(self._hooks()):
                model.run_linearized(self.tokens[None])
                self.sources: _Sources = _find_sources(model, self.tokens, run)
        finally:
            for handle in handles:
                handle.remove()
        self.run: LinearizedRun = run
        run.outputs.clear(), run.embed.clear()  # the autograd graph; values stay
        run.inputs[:] = [x.detach() for x in run.inputs]
        self._check_features()
        n_active = len(self.sources.active)
        n_rest = (self.n_layers + 1) * self.n_pos  # errors and tokens
        self.graph_columns = torch.cat(
            [graph.selected_features.long(), torch.arange(n_active, n_active + n_rest)]
        )

    def _hooks(self) -> list[tuple[str, Callable]]:
        def keep(value: Tensor, hook: Any) -> None:
            self.recorded[hook.name] = value.detach()[0]

        keep.reads_only = True  # type: ignore[attr-defined]
        wanted = (*RECORDED, "attn.hook_q", "attn.hook_k", "hook_rot_q", "hook_rot_k")
        return [(name, keep) for name in self.model.model.hook_dict if name.endswith(wanted)]

    def _qk_norm_hooks(self) -> list[Any]:
        """Record each layer's queries and keys after their QK-norm (``q_normed`` /
        ``k_normed``, [pos, heads, d_head]): no hook point sees them without rotary."""
        if not self.model.cfg.use_qk_norm:
            return []
        handles = []
        for layer, block in enumerate(self.model.blocks):
            for name in ("q", "k"):

                def keep(
                    module: Any,
                    args: Any,
                    out: Tensor,
                    name: str = f"{name}_normed",
                    layer: int = layer,
                    like: str = f"hook_{name}",
                ) -> None:
                    shape = self.recorded[f"blocks.{layer}.attn.{like}"].shape
                    self.recorded[f"blocks.{layer}.attn.{name}"] = out.detach()[0].view(shape)

                norm = getattr(block.attn, f"{name}_norm")
                handles.append(norm.register_forward_hook(keep))
        return handles

    def _check_features(self) -> None:
        active = self.sources.active.cpu()
        if active.shape != self.graph.active_features.shape or not torch.equal(
            active, self.graph.active_features.cpu().long()
        ):
            raise ValueError(
                f"The model's active features on the graph's prompt ({len(active)}) are not the "
                f"graph's ({len(self.graph.active_features)}): the graph was traced with other "
                "weights or transcoders; pass the ReplacementModel it was traced with."
            )

    def backward(self) -> FrozenBackward:
        """The written-out backward pass of this run (built once)."""
        if self._backward is None:
            self._backward = FrozenBackward(self.model, self.run, self.dtype)
        return self._backward

    # ------------------------------------------------------------------ the nodes
    @property
    def n_features(self) -> int:
        return len(self.graph.selected_features)

    @property
    def n_nodes(self) -> int:
        return self.graph.adjacency_matrix.shape[0]

    def kind(self, node: int) -> str:
        """'feature', 'error', 'token' or 'logit'."""
        errors_end = self.n_features + self.n_layers * self.n_pos
        if node < self.n_features:
            return "feature"
        if node < errors_end:
            return "error"
        return "token" if node < errors_end + self.n_pos else "logit"

    def check_node(self, node: Any, what: str) -> int:
        """``node`` as a graph node index in range, else a ValueError naming ``what``."""
        if isinstance(node, Tensor) and node.ndim == 0 and not node.is_floating_point():
            node = int(node)
        if isinstance(node, bool) or not isinstance(node, int):
            raise TypeError(f"{what} must be a graph node index (an int); got {node!r}.")
        if not 0 <= node < self.n_nodes:
            raise ValueError(
                f"{what}={node} is not a node of the graph (0 to {self.n_nodes - 1}: features, "
                "errors, tokens, then logits)."
            )
        return node

    def position(self, node: int) -> int:
        """The prompt position a node sits at (logits: the last)."""
        kind = self.kind(node)
        if kind == "feature":
            return int(self.graph.active_features[self.graph.selected_features[node], 1])
        if kind == "error":
            return (node - self.n_features) % self.n_pos
        if kind == "token":
            return node - self.n_features - self.n_layers * self.n_pos
        return self.n_pos - 1

    def target_injection(self, node: int) -> tuple[int, int, Float[Tensor, " d_model"]]:
        """(layer, position, vector) a target node's row injects, as ``attribute``'s: a
        feature's encoder vector at its transcoder input; a logit's demeaned unembedding
        after ``ln_final`` at the last position (layer ``n_layers``)."""
        kind = self.kind(node)
        if kind == "feature":
            active = int(self.graph.selected_features[node])
            layer, pos, _ = self.sources.active[active].tolist()
            return layer, pos, self.sources.encoders[active]
        if kind == "logit":
            logit = node - self.n_nodes + len(self.graph.logit_targets)
            vocab_idx = self.graph.logit_targets[logit].vocab_idx
            if vocab_idx >= self.model.cfg.d_vocab:
                raise ValueError(
                    f"Target {node} is a custom attribution target, whose vector the graph does "
                    "not keep: head loadings need a feature or a vocabulary logit as target."
                )
            unembed = self.model.unembed.W_U
            vector = unembed[:, vocab_idx] - unembed.mean(dim=-1)
            return self.n_layers, self.n_pos - 1, vector.detach()
        raise ValueError(
            f"Node {node} is a{'n' if kind == 'error' else ''} {kind} node: it has no incoming "
            "edges; a target is a feature or a logit."
        )

    def to_graph_columns(self, rows: Float[Tensor, "n columns"]) -> Float[Tensor, "n nodes"]:
        """``attribute``'s rows (every active feature, errors, tokens) as graph columns
        (selected features, errors, tokens, logits: zero)."""
        out = rows.new_zeros(rows.shape[0], self.n_nodes)
        out[:, : len(self.graph_columns)] = rows[:, self.graph_columns.to(rows.device)]
        return out

    def active_to_node(self) -> dict[int, int]:
        """Active feature index -> graph node index, for the selected features."""
        return {int(a): i for i, a in enumerate(self.graph.selected_features.tolist())}

    def feature_positions(self) -> Int[Tensor, " n_active"]:
        return self.sources.active[:, 1]
