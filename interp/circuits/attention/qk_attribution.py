"""QK attributions: a head's attention score at one query and key, written as a sum over
pairs of (query-side term, key-side term).

With the norm scales frozen, the query of head ``h`` at position ``q`` is affine in the
residual stream there, and so is the key at ``k``::

    query = rot_q( qnorm( W_Q[h]^T ln1(x_q) + b_Q[h] ) )     (each a linear map, frozen)
    key   = rot_k( knorm( W_K[g]^T ln1(x_k) + b_K[g] ) )     (g: h's key/value head, GQA)
    score = query . key / attn_scale  (+ ALiBi's slope[h] * k)

``residual_terms`` splits ``x_q`` and ``x_k`` into what each graph node wrote at that
position itself plus named rows (attention outputs per head, biases, skip paths, position
embeddings). Each term is sent through the frozen ``ln1`` (centred and scaled; its bias is
the row ``"ln1 bias"``), ``W_Q`` or ``W_K``, the frozen QK-norm and the rotation of its own
position (rotary), so ``pairs[i, j] = query_i . key_j / attn_scale`` and the pairs sum to
the score before the soft cap (``capped_score`` after it). ``b_Q``/``b_K`` are rows, a
shortformer's position embedding (added after ``ln1``) is the row ``"pos embed"``, ALiBi's
bias is the pair of rows ``"ALiBi"``. Attention sinks change the pattern, not the score.

Example:
    >>> from interp.circuits import ReplacementModel, attribute
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> graph = attribute("ROMEO:", replacement, max_feature_nodes=8, batch_size=64)
    >>> qk = qk_attribution(replacement, graph, layer=1, head=0, query_pos=5, key_pos=2)
    >>> qk.pairs.shape == (len(qk.query_nodes), len(qk.key_nodes))
    True
    >>> bool(abs(qk.pairs.sum() + qk.remainder - qk.score) < 1e-5)
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from interp.circuits.attention.frozen import FrozenRun, check_pair
from interp.circuits.attention.residual_terms import F64, FrozenNorm, frozen_norm, residual_terms
from interp.circuits.graph import Graph
from interp.circuits.replacement_model import ReplacementModel

Row = int | str  # a graph node index, or the name of a term that is not a node


@dataclass
class QKAttribution:
    """Head ``head`` of ``layer``, query ``query_pos``, key ``key_pos`` (module docstring).

    ``query_nodes`` / ``key_nodes``: each row's graph node index or name; ``labels`` of both
    in ``query_labels`` / ``key_labels``; ``pairs`` [n_query, n_key] (float64);
    ``score``: the frozen run's score before the soft cap; ``remainder``: ``score -
    pairs.sum()`` (float rounding); ``capped_score`` (None without a cap); ``pattern``: the
    attention weight."""

    layer: int
    head: int
    query_pos: int
    key_pos: int
    query_nodes: list[Row]
    key_nodes: list[Row]
    query_labels: list[str]
    key_labels: list[str]
    pairs: Float[Tensor, "n_query n_key"]
    score: float
    remainder: float
    capped_score: float | None
    pattern: float

    def top_pairs(self, k: int = 10) -> list[tuple[str, str, float]]:
        """The ``k`` pairs of largest ``|value|``: (query label, key label, value)."""
        flat = self.pairs.flatten()
        order = flat.abs().argsort(descending=True)[:k].tolist()
        n_key = self.pairs.shape[1]
        return [
            (self.query_labels[i // n_key], self.key_labels[i % n_key], float(flat[i]))
            for i in order
        ]

    def by_key(self) -> dict[str, float]:
        """Each key-side row's total (summed over the query side), largest first."""
        totals = self.pairs.sum(0)
        order = totals.abs().argsort(descending=True).tolist()
        return {self.key_labels[j]: float(totals[j]) for j in order}

    def by_query(self) -> dict[str, float]:
        """Each query-side row's total (summed over the key side), largest first."""
        totals = self.pairs.sum(1)
        order = totals.abs().argsort(descending=True).tolist()
        return {self.query_labels[i]: float(totals[i]) for i in order}


def node_label(run: FrozenRun, row: Row, pos: int) -> str:
    """A short label: ``"L1 F123 @5"``, ``"error L2 @5"``, ``"token 'e' @5"``, or the name."""
    if isinstance(row, str):
        return f"{row} @{pos}"
    kind = run.kind(row)
    if kind == "feature":
        layer, _, feature = run.graph.active_features[run.graph.selected_features[row]].tolist()
        return f"L{layer} F{feature} @{pos}"
    if kind == "error":
        return f"error L{(row - run.n_features) // run.n_pos} @{pos}"
    token = int(run.graph.input_tokens[pos])
    tokenizer = getattr(run.model, "tokenizer", None)
    text = tokenizer.decode([token]) if tokenizer is not None else str(token)
    return f"token {text!r} @{pos}"


class _Side:
    """One side (query or key) of one head: its projection, bias, norms and rotation."""

    def __init__(self, run: FrozenRun, layer: int, head: int, pos: int, side: str) -> None:
        model, cfg = run.model, run.model.cfg
        attn = model.blocks[layer].attn
        self.run, self.layer, self.pos, self.side = run, layer, pos, side
        self.ln1 = frozen_norm(run, model.blocks[layer].ln1, f"blocks.{layer}.ln1", pos)
        if side == "query":
            self.head, weight, bias = head, attn.W_Q, attn.b_Q
        else:
            W_K, b_K, _, _ = attn.key_value_weights()
            self.head = head // (cfg.n_heads // attn.n_key_value_heads)
            weight, bias = W_K, b_K
        self.n_heads = weight.shape[0]
        self.W = weight.detach().to(F64)  # [heads on this side, d_model, d_head]
        self.b = bias.detach().to(F64)  # [heads on this side, d_head]
        self.norm = self._qk_norm(attn)

    def _qk_norm(self, attn: Any) -> FrozenNorm | None:
        if not attn.cfg.use_qk_norm:
            return None
        name = "q_norm" if self.side == "query" else "k_norm"
        hook = f"blocks.{self.layer}.attn.{name}"
        return frozen_norm(self.run, getattr(attn, name), hook, self.pos)

    def project(self, vectors: Float[Tensor, "n d_model"], ln1: bool = True) -> Tensor:
        """[n, d_head]: each term's share of this head's query (or key), biases excluded."""
        inputs = self.ln1.linear(vectors) if ln1 else vectors
        every_head = torch.einsum("nm,hme->nhe", inputs, self.W)  # [n, heads, d_head]
        return self.finish(every_head)

    def finish(self, every_head: Float[Tensor, "n heads d_head"]) -> Tensor:
        """QK-norm (frozen, per head or across heads) and rotation, then this head's slice."""
        if self.norm is not None:
            n, h, e = every_head.shape
            across = self.norm.factor.shape[-1] == h * e  # weight over every head at once
            if across:
                every_head = self.norm.linear(every_head.reshape(n, h * e)).view(n, h, e)
            else:  # scale [heads, 1]; weight [d_head]
                every_head = self.norm.linear(every_head)
        vectors = every_head[:, self.head]
        rotary = self.run.model.blocks[self.layer].attn.rotary
        if rotary is not None:
            positions = torch.arange(self.run.n_pos, device=rotary.inv_freq.device)[None]
            cos, sin = rotary.cos_sin(positions, F64)  # [1, pos, 1, rotary_dim]
            cos, sin = (
                cos[0, self.pos, 0].to(vectors.device),
                sin[0, self.pos, 0].to(vectors.device),
            )
            dim = rotary.rotary_dim
            rotating = vectors[:, :dim]
            rotated = rotating * cos + rotary._rotate(rotating) * sin
            vectors = torch.cat([rotated, vectors[:, dim:]], dim=-1)
        return vectors

    def rows(self) -> tuple[list[Row], Float[Tensor, "n d_head"]]:
        """Every term of this side and its vector in the head's space."""
        terms = residual_terms(self.run, self.layer, self.pos)
        keys = terms.keys()
        vectors = [self.project(terms.matrix())]
        if self.ln1.bias is not None:
            keys.append("ln1 bias")
            vectors.append(self.project(self.ln1.bias[None], ln1=False))
        keys.append("b_Q" if self.side == "query" else "b_K")
        bias = self.b.new_zeros(1, self.n_heads, self.b.shape[-1])
        bias[0] = self.b
        vectors.append(self.finish(bias))
        if self.run.model.cfg.positional_embedding_type == "shortformer":
            keys.append("pos embed")
            pos_embed = self.run.recorded["hook_pos_embed"][self.pos].to(F64)
            vectors.append(self.project(pos_embed[None], ln1=False))
        return keys, torch.cat(vectors)


def _check_call(run: FrozenRun, layer: Any, head: Any, query_pos: Any, key_pos: Any) -> None:
    cfg = run.model.cfg
    for name, value, size, what in (
        ("layer", layer, cfg.n_layers, "layers"),
        ("head", head, cfg.n_heads, "heads a layer"),
        ("query_pos", query_pos, run.n_pos, "positions in the prompt"),
        ("key_pos", key_pos, run.n_pos, "positions in the prompt"),
    ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int; got {value!r}.")
        if not 0 <= value < size:
            raise ValueError(
                f"{name}={value} is out of range: the model has {size} {what} (0 to {size - 1})."
            )
    attn = run.model.blocks[layer].attn
    if not attn.bidirectional and key_pos > query_pos:
        raise ValueError(
            f"key_pos={key_pos} is after query_pos={query_pos}: a causal model's query "
            "attends only to keys at or before it; swap them or pick an earlier key."
        )
    window = attn.window_size
    if window is not None and not attn.bidirectional and query_pos - key_pos >= window:
        raise ValueError(
            f"Layer {layer} attends within a window of {window} positions: key_pos={key_pos} "
            f"is masked for query_pos={query_pos} (it must be > {query_pos - window})."
        )


def _frozen_score(run: FrozenRun, layer: int, head: int, q: int, k: int) -> tuple[float, float]:
    """(the run's score before the cap, its pattern weight) from the recorded q and k."""
    attn = run.model.blocks[layer].attn
    prefix = f"blocks.{layer}.attn."
    if attn.rotary is not None:
        names = ("hook_rot_q", "hook_rot_k")
    else:  # hook_q / hook_k are before a QK-norm: its outputs
        names = ("q_normed", "k_normed") if attn.cfg.use_qk_norm else ("hook_q", "hook_k")
    kv_head = head // (run.n_heads // attn.n_key_value_heads)
    query = run.recorded[prefix + names[0]][q, head]
    key = run.recorded[prefix + names[1]][k, kv_head]
    score = float((query.to(F64) @ key.to(F64)) / attn.cfg.attn_scale)
    if attn.alibi_slopes is not None:
        score += float(attn.alibi_slopes[head]) * k
    pattern = float(run.recorded[f"{prefix}hook_pattern"][head, q, k])
    return score, pattern


def qk_attribution(
    model: ReplacementModel,
    graph: Graph,
    layer: int,
    head: int,
    query_pos: int,
    key_pos: int,
    *,
    frozen_run: FrozenRun | None = None,
) -> QKAttribution:
    """Head ``head`` of ``layer``'s score from ``query_pos`` to ``key_pos`` on ``graph``'s
    prompt, as pairs of query-side and key-side terms (see the module docstring).
    ``frozen_run`` reuses a ``FrozenRun`` of the graph's prompt in ``model``."""
    check_pair(model, graph, "qk_attribution")
    run = frozen_run if frozen_run is not None else FrozenRun(model, graph)
    _check_call(run, layer, head, query_pos, key_pos)
    attn = model.blocks[layer].attn
    with torch.no_grad():
        query_rows, queries = _Side(run, layer, head, query_pos, "query").rows()
        key_rows, keys = _Side(run, layer, head, key_pos, "key").rows()
        pairs = queries @ keys.T / attn.cfg.attn_scale  # [n_query, n_key]
        if attn.alibi_slopes is not None:
            query_rows.append("ALiBi")
            key_rows.append("ALiBi")
            pairs = torch.nn.functional.pad(pairs, (0, 1, 0, 1))
            pairs[-1, -1] = float(attn.alibi_slopes[head]) * key_pos
        score, pattern = _frozen_score(run, layer, head, query_pos, key_pos)
    cap = model.cfg.attn_scores_soft_cap
    capped = cap * float(torch.tanh(torch.tensor(score / cap, dtype=F64))) if cap > 0 else None
    return QKAttribution(
        layer, head, query_pos, key_pos, query_rows, key_rows,
        [node_label(run, row, query_pos) for row in query_rows],
        [node_label(run, row, key_pos) for row in key_rows],
        pairs.cpu(), score, score - float(pairs.sum()), capped, pattern,
    )  # fmt: skip
