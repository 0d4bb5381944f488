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
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from interp.circuits.attribution.logit_targets import (
    CustomTarget,
    _decode,
    _logit_targets,
    ensure_tokenized,
)
from interp.circuits.attribution.rows import (
    _adjacency,
    _feature_rows,
    _logit_rows,
    _row_writer,
    _Rows,
)
from interp.circuits.attribution.sources import _find_sources
from interp.circuits.attribution.sparse_rows import SparseRows
from interp.circuits.backward import FrozenBackward, tensor_parallel, unsupported
from interp.circuits.graph import Graph
from interp.circuits.offload import check_offload, offloaded
from interp.circuits.replacement_model import LinearizedRun, ReplacementModel

logger = logging.getLogger(__name__)


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
