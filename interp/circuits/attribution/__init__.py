"""``attribute``: the attribution graph of one prompt, as circuit-tracer 0.5.0 computes it.

1. One frozen forward (``ReplacementModel.linearized``), at batch 1, records every
   transcoder's input and the MLP outputs: the active features (position 0 zeroed), their
   encoder and activation-scaled decoder vectors, the error nodes (MLP output minus
   reconstruction) and the logit targets.
2. Each backward pass computes up to ``batch_size`` rows at once, from that one forward's
   frozen patterns and norm scales (circuit-tracer runs the forward ``batch_size`` times
   instead): a feature's row injects its encoder vector as the gradient of the transcoder
   input at (layer, pos); a logit's row injects its demeaned unembedding column after
   ``ln_final``. The gradient at every transcoder output, dotted with each source's decoder
   (or error) vector, and at ``hook_embed`` with each token's embedding, is the direct
   effect of that source on the row's node. ``FrozenBackward`` (``backward.py``) computes
   the gradients; ``autograd_gradients``, through the forward's autograd graph, stands in
   for the configurations it does not cover (refused on a tensor-parallel model, where
   ``attribute`` runs on every rank and gives one process's graph).
3. With ``max_feature_nodes``, features are visited in order of their influence on the
   logits through the rows computed so far, re-ranked every ``update_interval`` batches.

Example:
    >>> from interp.circuits import ReplacementModel
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> prompt = "ROMEO:\\nIt seems she hangs upon the chee"
    >>> graph = attribute(prompt, replacement, max_feature_nodes=32, batch_size=64)
    >>> graph.adjacency_matrix.shape   # [nodes, nodes]: rows targets, columns sources
    torch.Size([232, 232])
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, NamedTuple

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.circuits.attribution import chunks
from interp.circuits.attribution.sparse_rows import SparseRows
from interp.circuits.backward import FrozenBackward, tensor_parallel, unsupported
from interp.circuits.graph import Graph, LogitTarget, compute_partial_influences
from interp.circuits.offload import check_offload, offloaded
from interp.circuits.replacement_model import LinearizedRun, ReplacementModel

logger = logging.getLogger(__name__)


class CustomTarget(NamedTuple):
    """An output node with its own direction: a label, a weight and a ``[d_model]`` vector."""

    token_str: str
    prob: float
    vec: Tensor


class _Targets(NamedTuple):
    targets: list[LogitTarget]
    probabilities: Float[Tensor, " n"]
    vectors: Float[Tensor, "n d_model"]


def ensure_tokenized(prompt: str | Tensor | list[int], model: ReplacementModel) -> Tensor:
    """1-D token ids; a special token (the first of bos, pad, eos, ... that is set) is
    prepended unless the first token is one (circuit-tracer's rule, for tokens too)."""
    tokenizer = model.tokenizer
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("A text prompt needs model.tokenizer; pass token ids instead.")
        tokens = torch.tensor(tokenizer.encode(prompt, add_special_tokens=False))
    elif isinstance(prompt, Tensor):
        tokens = prompt.squeeze()
    elif isinstance(prompt, (list, tuple)):
        tokens = torch.tensor(list(prompt), dtype=torch.long).squeeze()
    else:
        raise TypeError(f"prompt must be a str, a tensor or a list of ids; got {type(prompt)}.")
    if tokens.ndim == 0:
        tokens = tokens[None]
    if tokens.ndim != 1 or tokens.is_floating_point() or len(tokens) == 0:
        raise ValueError(
            f"prompt tokens must be one non-empty sequence of ids; got shape "
            f"{tuple(tokens.shape)} and dtype {tokens.dtype}."
        )
    tokens = tokens.long().to(model.cfg.device)
    if tokenizer is not None and int(tokens[0]) not in tokenizer.all_special_ids:
        candidates = [tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id]
        special = next(filter(None, [*candidates, *tokenizer.all_special_ids]), None)
        if special is not None:
            tokens = torch.cat([tokens.new_tensor([special]), tokens])
    if (tokens < 0).any() or (tokens >= model.cfg.d_vocab).any():
        raise ValueError(f"Token ids must be in [0, {model.cfg.d_vocab}); got {tokens.tolist()}.")
    if len(tokens) > model.cfg.n_ctx:
        raise ValueError(
            f"The prompt has {len(tokens)} tokens (with the prepended special token) but the "
            f"model's context is n_ctx={model.cfg.n_ctx}; shorten it."
        )
    return tokens


def _decode(model: ReplacementModel, ids: Any) -> str:
    if model.tokenizer is None:
        return " ".join(str(i) for i in torch.as_tensor(ids).flatten().tolist())
    return model.tokenizer.decode(ids)


def _logit_targets(
    spec: Any,
    logits: Float[Tensor, " d_vocab"],
    model: ReplacementModel,
    max_n_logits: int,
    desired_logit_prob: float,
) -> _Targets:
    """The output nodes: salient logits (by cumulative probability), given ids or token
    strings, or ``CustomTarget``s; each with its probability and demeaned unembedding."""
    probs = torch.softmax(logits.float(), dim=-1)
    unembed = model.unembed.W_U  # [d_model, d_vocab]
    if spec is not None and len(spec) > 0 and isinstance(spec[0], tuple):
        try:
            custom = [CustomTarget(str(token), float(prob), vec) for token, prob, vec in spec]
        except (TypeError, ValueError):
            raise TypeError(
                "A custom attribution target is a (token_str, prob, vec) tuple (CustomTarget), "
                f"with prob a number; got {[type(t).__name__ for t in spec[0]]} first."
            ) from None
        for target in custom:
            vec = target.vec
            if not isinstance(vec, Tensor) or vec.shape != (model.cfg.d_model,):
                shape = tuple(vec.shape) if isinstance(vec, Tensor) else type(vec).__name__
                raise ValueError(
                    f"CustomTarget {target.token_str!r}: vec must be a [d_model="
                    f"{model.cfg.d_model}] tensor (a direction in the residual stream after "
                    f"ln_final); got {shape}."
                )
            if not torch.isfinite(vec).all():
                raise ValueError(f"CustomTarget {target.token_str!r}: vec has NaN or inf entries.")
        targets = [LogitTarget(t.token_str, model.cfg.d_vocab + i) for i, t in enumerate(custom)]
        probabilities = torch.tensor([float(t.prob) for t in custom])
        vectors = torch.stack([t.vec.to(unembed) for t in custom])
        return _Targets(targets, probabilities, vectors)
    if spec is None:
        top_p, top_idx = torch.topk(probs, min(max_n_logits, len(probs)))
        cutoff = int(torch.searchsorted(torch.cumsum(top_p, 0), desired_logit_prob)) + 1
        indices = top_idx[:cutoff]
    elif isinstance(spec, Tensor) or all(isinstance(i, int) for i in spec):
        if isinstance(spec, Tensor) and (spec.is_floating_point() or spec.is_complex()):
            raise TypeError(f"attribution_targets as a tensor holds token ids; got {spec.dtype}.")
        indices = torch.as_tensor(spec, dtype=torch.long, device=probs.device).flatten()
    elif all(isinstance(s, str) for s in spec):
        ids = [model.tokenizer.encode(s, add_special_tokens=False) for s in spec]
        bad = [s for s, i in zip(spec, ids, strict=True) if len(i) != 1]
        if bad:
            raise ValueError(f"Targets {bad} are not single tokens; give one token each.")
        indices = torch.tensor([i[0] for i in ids], device=probs.device)
    else:
        raise TypeError(
            "attribution_targets must be None, token ids, token strings or CustomTargets."
        )
    if len(indices) == 0 or (indices < 0).any() or (indices >= len(probs)).any():
        raise ValueError(f"Target ids {indices.tolist()} must be non-empty, in [0, {len(probs)}).")
    vectors = (unembed[:, indices] - unembed.mean(dim=-1, keepdim=True)).T
    targets = [LogitTarget(_decode(model, i), i) for i in indices.tolist()]
    return _Targets(targets, probs[indices], vectors)


class _Writes(NamedTuple):
    """What the active features write to one layer's transcoder output: for each (feature,
    this layer) pair, the feature's column and its activation-scaled decoder vector
    (per-layer transcoders: the layer's own features; CLTs: every earlier layer's), sorted
    by position: those at position ``p`` are ``offsets[p]:offsets[p + 1]``."""

    columns: Int[Tensor, " n"]
    vectors: Float[Tensor, "n d_model"]
    offsets: list[int]

    @staticmethod
    def by_position(columns: Tensor, positions: Tensor, vectors: Tensor, n_pos: int) -> _Writes:
        order = torch.argsort(positions, stable=True)
        counts = torch.bincount(positions, minlength=n_pos).tolist()
        offsets = [0]
        for count in counts:
            offsets.append(offsets[-1] + count)
        return _Writes(columns[order], vectors[order], offsets)


class _Sources(NamedTuple):
    """What the forward pass found: the nodes whose effects the rows read."""

    active: Int[Tensor, "n 3"]  # (layer, pos, feature)
    values: Float[Tensor, " n"]
    encoders: Float[Tensor, "n d_model"]
    writes: list[_Writes]  # one a layer
    errors: Float[Tensor, "n_layers pos d_model"]
    tokens: Float[Tensor, "pos d_model"]


@torch.no_grad()
def _find_sources(model: ReplacementModel, tokens: Tensor, run: LinearizedRun) -> _Sources:
    tcs, n_layers, n_pos = model.transcoders, model.cfg.n_layers, len(tokens)
    inputs = [run.inputs[layer][0] for layer in range(n_layers)]
    chunk = max(1, min(n_pos, chunks.ACTIVATION_BUDGET // (n_layers * tcs.d_transcoder)))
    found = [
        chunks.find_in_chunk(model, inputs, run, start, min(start + chunk, n_pos))
        for start in range(0, n_pos, chunk)
    ]
    active = torch.cat([part.active for part in found])
    order = torch.argsort(active[:, 0], stable=True)  # (layer, pos, feature) order again
    active, values = active[order], torch.cat([part.values for part in found])[order]
    if len(active) == 0:
        raise ValueError(
            "No transcoder feature is active on this prompt (position 0 is ignored): there "
            "is no graph to build; try a longer prompt or check the transcoders."
        )
    layer, pos, feature = active.unbind(-1)
    encoders = torch.cat([tcs.encoder_vectors(i, feature[layer == i]) for i in range(n_layers)])
    columns = torch.arange(len(active), device=active.device)
    writes = []
    for target in range(n_layers):
        writers = [i for i in range(target + 1) if target in tcs.writes_to(i)]
        mask = torch.isin(layer, torch.tensor(writers, device=layer.device))
        vectors = [
            tcs.decoder_vectors(i, feature[layer == i], target) * values[layer == i, None]
            for i in writers
        ]
        writes.append(_Writes.by_position(columns[mask], pos[mask], torch.cat(vectors), n_pos))
    errors = torch.cat([part.errors for part in found], dim=1)  # [n_layers, pos, d_model]
    return _Sources(active, values, encoders, writes, errors, model.W_E[tokens])


def autograd_gradients(
    model: ReplacementModel,
    run: LinearizedRun,
    final: Tensor,
    layers: Int[Tensor, " k"],
    positions: Int[Tensor, " k"],
    inject: Float[Tensor, "k d_model"],
) -> Iterator[tuple[int, Float[Tensor, "k pos d_model"]]]:
    """``FrozenBackward.gradients`` by ``torch.autograd`` through the linearized forward's
    graph, batched by vmap (``is_grads_batched``): for any configuration, every row and
    position (layer ``n_layers`` injects after ``ln_final``)."""
    n_layers = model.cfg.n_layers
    batch = len(layers)
    rows_of = torch.arange(batch, device=final.device)
    outputs, grad_outputs = [], []
    for layer in layers.unique().tolist():
        tensor = final if layer == n_layers else run.inputs[layer]  # [1, pos, d_model]
        mask = layers == layer
        grad = tensor.new_zeros(batch, *tensor.shape)  # one gradient a row, batched by vmap
        grad[rows_of[mask], 0, positions[mask]] = inject[mask].to(tensor.dtype)
        outputs.append(tensor)
        grad_outputs.append(grad)
    sinks = [*run.outputs, run.embed[0]]
    grads = torch.autograd.grad(
        outputs, sinks, grad_outputs, retain_graph=True, allow_unused=True, is_grads_batched=True
    )
    for sink, grad in enumerate(grads):
        if grad is not None:
            yield sink, grad[:, 0]  # [batch, pos, d_model]


def _gradient_rows(
    sources: _Sources,
    gradients: Iterator[tuple[int, Float[Tensor, "n q d_model"]]],
    batch: int,
    dtype: torch.dtype,
) -> Float[Tensor, "batch n_columns"]:
    """Row ``i`` holds the direct effects of every feature, error and token node on the
    node that row ``i`` of ``gradients`` started from: the gradient at each layer's
    transcoder output, dotted with the vectors written there, and at the embedding, with
    each token's. A gradient may cover only the first rows and positions (the rest zero)."""
    n_layers, n_pos = len(sources.writes), len(sources.tokens)
    n_features = len(sources.active)
    device = sources.tokens.device
    rows = torch.zeros(batch, n_features + (n_layers + 1) * n_pos, dtype=dtype, device=device)
    for sink, grad in gradients:
        n, q = grad.shape[:2]
        grad = grad.to(dtype)
        if sink == n_layers:  # the embedding: token nodes
            token_col = n_features + n_layers * n_pos
            token_vectors = sources.tokens[:q].to(dtype)
            rows[:n, token_col : token_col + q] = torch.einsum("bpd,pd->bp", grad, token_vectors)
            continue
        writes, effects = sources.writes[sink], []
        for pos in range(q):  # the gradient at pos against the vectors written there
            start, end = writes.offsets[pos], writes.offsets[pos + 1]
            if end > start:
                effects.append(grad[:, pos] @ writes.vectors[start:end].to(dtype).T)
        if effects:
            written = writes.columns[: writes.offsets[q]]
            rows[:n].index_add_(1, written, torch.cat(effects, dim=1))
        error_col = n_features + sink * n_pos
        errors = sources.errors[sink, :q].to(dtype)
        rows[:n, error_col : error_col + q] = torch.einsum("bpd,pd->bp", grad, errors)
    return rows


def _check_arguments(
    max_n_logits: int,
    desired_logit_prob: float,
    batch_size: int,
    max_feature_nodes: int | None,
    update_interval: int,
) -> None:
    positive = (("max_n_logits", max_n_logits), ("batch_size", batch_size))
    for name, value in (*positive, ("update_interval", update_interval)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}; it must be a positive int.")
    if max_feature_nodes is not None and (
        isinstance(max_feature_nodes, bool)
        or not isinstance(max_feature_nodes, int)
        or max_feature_nodes < 1
    ):
        raise ValueError(
            f"max_feature_nodes={max_feature_nodes!r}; it must be a positive int (or None "
            "for every active feature)."
        )
    if not 0.0 < desired_logit_prob <= 1.0:
        raise ValueError(f"desired_logit_prob={desired_logit_prob!r}; it must be in (0, 1].")


class _Rows:
    """The edge rows being filled: one per visited node (logits first, then features in the
    order visited), ``[rows, logit_offset + n_logits]``, and the node each row belongs to."""

    def __init__(self, n_rows: int, logit_offset: int, n_logits: int, dtype: torch.dtype) -> None:
        self.logit_offset = logit_offset
        self.edges = torch.zeros(n_rows, logit_offset + n_logits, dtype=dtype)
        self.to_node = torch.zeros(n_rows, dtype=torch.long)  # [rows]

    def store(self, first_row: int, computed: Float[Tensor, "batch columns"]) -> None:
        self.edges[first_row : first_row + len(computed), : self.logit_offset] = computed.cpu()

    def partial_influences(self, logit_probabilities: Tensor, n_rows: int) -> Tensor:
        return compute_partial_influences(
            self.edges[:n_rows], logit_probabilities, self.to_node[:n_rows]
        )


def _row_writer(
    model: ReplacementModel,
    run: LinearizedRun,
    final: Tensor,
    sources: _Sources,
    backward: FrozenBackward | None,
    rows: _Rows | SparseRows,
    dtype: torch.dtype,
) -> Callable[[Tensor, Tensor, Tensor, int], None]:
    """``write(layers, positions, inject, first_row)``: the rows injecting ``inject`` at
    (layer, position), by ``backward`` (else autograd), written from ``first_row`` on; in
    passes of at most ``chunks.BACKWARD_BUDGET`` elements a gradient or row block (a batch
    that fits is one pass; any split gives the same rows)."""
    n_columns = rows.logit_offset  # a row's width: features, errors, tokens
    width = max(len(sources.tokens) * model.cfg.d_model, n_columns)
    step = max(1, chunks.BACKWARD_BUDGET // width)

    def write(layers: Tensor, positions: Tensor, inject: Tensor, first_row: int) -> None:
        for start in range(0, len(layers), step):  # still sorted by layer, highest first
            part = slice(start, start + step)
            args = (layers[part], positions[part], inject[part])
            if backward is not None:
                gradients = backward.gradients(*args)
            else:
                gradients = autograd_gradients(model, run, final, *args)
            computed = _gradient_rows(sources, gradients, len(args[0]), dtype)
            rows.store(first_row + start, computed)

    return write


def _logit_rows(
    write: Callable[[Tensor, Tensor, Tensor, int], None],
    targets: _Targets,
    rows: _Rows | SparseRows,
    n_layers: int,
    n_pos: int,
    batch_size: int,
    device: torch.device,
) -> None:
    """The logits' rows (the first ``n_logits``): each injects its vector after ``ln_final``
    at the last position."""
    n_logits = len(targets.targets)
    for start in range(0, n_logits, batch_size):
        vectors = targets.vectors[start : start + batch_size]
        k = len(vectors)
        layers = torch.full((k,), n_layers, device=device)
        write(layers, torch.full((k,), n_pos - 1, device=device), vectors, start)
        rows.to_node[start : start + k] = torch.arange(start, start + k) + rows.logit_offset


def _feature_rows(
    write: Callable[[Tensor, Tensor, Tensor, int], None],
    sources: _Sources,
    targets: _Targets,
    rows: _Rows | SparseRows,
    n_visit: int,
    batch_size: int,
    update_interval: int,
    verbose: bool,
    device: torch.device,
) -> Bool[Tensor, " n_active"]:
    """The features' rows, after the logits': all active features, or the ``n_visit`` most
    influential ones, re-ranked every ``update_interval`` batches; returns which were
    visited."""
    n_active = len(sources.active)
    next_row, visited = len(targets.targets), torch.zeros(n_active, dtype=torch.bool)
    n_visited = 0
    feature_layer, feature_pos = sources.active[:, 0], sources.active[:, 1]
    layer_cpu, pos_cpu = feature_layer.cpu(), feature_pos.cpu()
    progress = tqdm(total=n_visit, desc="Feature attribution", disable=not verbose)
    while n_visited < n_visit:
        if n_visit == n_active:
            pending = torch.arange(n_active)
        else:
            influence = rows.partial_influences(targets.probabilities, next_row)
            rank = torch.argsort(influence[:n_active], descending=True)
            queue = min(update_interval * batch_size, n_visit - n_visited)
            pending = rank[~visited[rank]][:queue]
        # Any split of the queue into batches gives the same rows. By position, a batch
        # spans few positions (FrozenBackward stops at the last one); within a batch,
        # by layer, highest first (it starts each row at its layer).
        pending = pending[torch.argsort(pos_cpu[pending], stable=True)]
        for start in range(0, len(pending), batch_size):
            chunk = pending[start : start + batch_size]
            chunk = chunk[torch.argsort(layer_cpu[chunk], descending=True, stable=True)]
            idx = chunk.to(device)
            write(feature_layer[idx], feature_pos[idx], sources.encoders[idx], next_row)
            rows.to_node[next_row : next_row + len(chunk)] = chunk
            visited[chunk] = True
            next_row += len(chunk)
            n_visited += len(chunk)
            progress.update(len(chunk))
    progress.close()
    return visited


def _adjacency(
    rows: _Rows, visited: Tensor, n_visit: int, n_logits: int, dtype: torch.dtype
) -> tuple[Tensor, Float[Tensor, "nodes nodes"]]:
    """(the visited features' indices, the graph's adjacency matrix): the rows in node
    order, the unvisited features' columns dropped, the logits' rows last."""
    n_active, logit_offset = len(visited), rows.logit_offset
    selected = torch.where(visited)[0]
    edge_rows = rows.edges
    if n_visit < n_active:
        columns = torch.cat([selected, torch.arange(n_active, logit_offset + n_logits)])
        edge_rows = edge_rows[:, columns]
    edge_rows = edge_rows[rows.to_node.argsort()]
    n_nodes = edge_rows.shape[1]
    adjacency = torch.zeros(n_nodes, n_nodes, dtype=dtype)
    adjacency[:n_visit] = edge_rows[:n_visit]
    adjacency[-n_logits:] = edge_rows[n_visit:]
    return selected, adjacency


def _release_forward(run: LinearizedRun) -> None:
    """Free what only autograd through the forward reads, once ``FrozenBackward`` holds its
    copies: the autograd graph (with what it saved) and the frozen attention patterns (at
    long prompts, ``[n_heads, pos, pos]`` a layer)."""
    run.outputs.clear(), run.inputs.clear(), run.embed.clear()
    for name in [name for name in run.frozen if name.endswith("hook_pattern")]:
        del run.frozen[name]


def attribute(
    prompt: str | Tensor | list[int],
    model: ReplacementModel,
    *,
    attribution_targets: Sequence[str] | Sequence[CustomTarget] | Tensor | None = None,
    max_n_logits: int = 10,
    desired_logit_prob: float = 0.95,
    batch_size: int = 512,
    max_feature_nodes: int | None = None,
    offload: Literal["cpu", "disk"] | None = None,
    verbose: bool = False,
    update_interval: int = 4,
    sparse_threshold: float | None = None,
) -> Graph:
    """The attribution graph of ``prompt`` in ``model``'s local replacement model (see the
    module docstring); ``batch_size`` rows a backward pass, at most ``max_feature_nodes``
    feature rows held (re-ranked by partial influence when it cuts). ``offload`` moves the
    weights the backward passes do not read to the CPU or to disk meanwhile
    (``interp.circuits.offload``).

    ``sparse_threshold=t`` (in [0, 1)) keeps, of each row, only the edges whose absolute
    value is at least ``t`` times the row's absolute total, as each batch of rows is
    computed, and gives the graph a sparse ``adjacency_matrix`` (``torch.sparse_coo``):
    memory grows with the edges kept instead of rows x columns. ``t = 0`` keeps every
    nonzero edge (the dense graph's matrix exactly); pruning and scores read the sparse
    graph on its kept edges (``interp.circuits.sparse_graph`` states the approximation)."""
    if not isinstance(model, ReplacementModel):
        raise TypeError(
            f"model must be a ReplacementModel (ReplacementModel.from_model(model, "
            f"transcoders)); got {type(model).__name__}."
        )
    _check_arguments(
        max_n_logits, desired_logit_prob, batch_size, max_feature_nodes, update_interval
    )
    check_offload(offload)
    if sparse_threshold is not None and (
        isinstance(sparse_threshold, bool)
        or not isinstance(sparse_threshold, (int, float))
        or not 0 <= sparse_threshold < 1
    ):
        raise ValueError(
            f"sparse_threshold={sparse_threshold!r}; it must be a number in [0, 1) (an edge's "
            "smallest share of its row kept), or None for a dense graph."
        )
    tokens = ensure_tokenized(prompt, model)
    n_layers, n_pos = model.cfg.n_layers, len(tokens)
    dtype = torch.promote_types(torch.float32, model.cfg.dtype)
    why_autograd = unsupported(model)  # before linearized() attaches its hooks
    if why_autograd is not None and tensor_parallel(model) is not None:
        raise ValueError(
            f"attribute on a tensor-parallel model runs the written-out backward pass only, "
            f"which does not cover {why_autograd}; remove them, or load the model in one "
            "process (without tp_size)."
        )
    if why_autograd is not None:
        logger.info("Gradients by autograd (slower): FrozenBackward skips %s", why_autograd)
    with model.linearized() as run, contextlib.ExitStack() as reload:
        final = model.run_linearized(tokens[None])  # one forward; backward is batched
        with torch.no_grad():
            logits = model.unembed(final[:, -1:])[0, -1]  # soft-capped, as the model's
        sources = _find_sources(model, tokens, run)
        targets = _logit_targets(
            attribution_targets, logits, model, max_n_logits, desired_logit_prob
        )
        n_active, n_logits = len(sources.active), len(targets.targets)
        n_visit = min(max_feature_nodes or n_active, n_active)
        logger.info("%d active features; visiting %d, %d logits", n_active, n_visit, n_logits)
        logit_offset = n_active + (n_layers + 1) * n_pos
        if sparse_threshold is None:
            rows = _Rows(n_visit + n_logits, logit_offset, n_logits, dtype)
        else:
            rows = SparseRows(n_visit + n_logits, logit_offset, n_logits, dtype, sparse_threshold)

        backward = FrozenBackward(model, run, dtype) if why_autograd is None else None
        if backward is not None:  # the forward's autograd graph is autograd_gradients' alone
            _release_forward(run)
            final = final.detach()
        unread = [*(block.mlp for block in model.blocks), model.embed, model.unembed]
        if backward is not None:  # it holds the skip matrices; autograd's graph reads them
            unread.append(model.transcoders)
        reload.enter_context(offloaded(unread, offload))
        write = _row_writer(model, run, final, sources, backward, rows, dtype)

        _logit_rows(write, targets, rows, n_layers, n_pos, batch_size, final.device)
        visited = _feature_rows(
            write, sources, targets, rows, n_visit, batch_size, update_interval, verbose,
            final.device,
        )  # fmt: skip
        run.outputs.clear(), run.inputs.clear(), run.embed.clear()  # frees the autograd graph

    if isinstance(rows, SparseRows):
        selected, adjacency = rows.adjacency(visited, n_visit)
    else:
        selected, adjacency = _adjacency(rows, visited, n_visit, n_logits, dtype)
    return Graph(
        input_string=_decode(model, tokens.cpu()),
        input_tokens=tokens.cpu(),
        logit_targets=targets.targets,
        logit_probabilities=targets.probabilities.cpu(),
        vocab_size=model.cfg.d_vocab,
        active_features=sources.active.cpu(),
        activation_values=sources.values.cpu(),
        selected_features=selected,
        adjacency_matrix=adjacency,
        cfg=model.cfg,
        scan=model.scan,
        tokenizer=model.tokenizer,
    )


# circuit-tracer's submodules (``attribution.attribute``, ``attribution.targets``). Importing a
# submodule binds its name in this package, so ``attribute`` is bound to the function again
# afterwards: ``from interp.circuits.attribution import attribute`` stays the function.
_attribute_function = attribute
import interp.circuits.attribution.attribute  # noqa: E402, F401
from interp.circuits.attribution.targets import AttributionTargets, TargetSpec  # noqa: E402, F401

attribute = _attribute_function
