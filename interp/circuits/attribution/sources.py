"""What one frozen forward finds for ``attribute``: the active features (with their encoder
and activation-scaled decoder vectors, grouped by the layer and position they write to),
the error nodes and the token embeddings: the sources whose direct effects the rows read."""

from __future__ import annotations

from typing import NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.circuits.attribution import chunks
from interp.circuits.replacement_model import LinearizedRun, ReplacementModel


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
