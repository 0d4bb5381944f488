"""The forward half of ``attribute`` a chunk of positions at a time: the active features
and error vectors at positions ``start:end``. The activations ``[n_layers, positions,
d_transcoder]`` of a long prompt do not fit in memory (at 4,096 tokens, 26 layers and
16,384 features, 7 GiB in float32); ``attribute`` encodes at most ``ACTIVATION_BUDGET``
of them at once, and a prompt that fits is one chunk, the computation it always was.
Likewise ``attribute``'s backward passes: ``BACKWARD_BUDGET`` bounds a pass's gradient and
rows (at 4,096 tokens and d_model 2,304, 512 rows' gradient alone would be 18 GiB).

Example:
    >>> from interp.circuits import ReplacementModel, ensure_tokenized
    >>> replacement = ReplacementModel.from_pretrained(
    ...     "shakespeare-char", "shakespeare-char-transcoders")
    >>> tokens = ensure_tokenized("ROMEO:", replacement)
    >>> with replacement.linearized() as run:
    ...     _ = replacement.run_linearized(tokens[None])
    ...     inputs = [run.inputs[layer][0] for layer in range(replacement.cfg.n_layers)]
    ...     found = find_in_chunk(replacement, inputs, run, 2, 5)
    >>> bool((found.active[:, 1] >= 2).all()), tuple(found.errors.shape)   # [layers, 3, d_model]
    (True, (4, 3, 128))
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import torch
from jaxtyping import Float, Int
from torch import Tensor

if TYPE_CHECKING:
    from interp.circuits.replacement_model import LinearizedRun, ReplacementModel

# The most feature activations (``[n_layers, positions, d_transcoder]`` elements) the forward
# holds at once: a longer prompt is encoded a chunk of positions at a time (a prompt that
# fits is one chunk: the same computation as without chunks).
ACTIVATION_BUDGET = 2**28  # 1 GiB of float32

# The most elements of one backward pass's gradient (``[rows, positions, d_model]``) or
# block of rows (``[rows, columns]``): a batch past it runs as several passes.
BACKWARD_BUDGET = 2**28  # 1 GiB of float32


class Found(NamedTuple):
    active: Int[Tensor, "n 3"]  # (layer, pos, feature), pos in the whole prompt
    values: Float[Tensor, " n"]
    errors: Float[Tensor, "n_layers chunk d_model"]


def find_in_chunk(
    model: ReplacementModel, inputs: list[Tensor], run: LinearizedRun, start: int, end: int
) -> Found:
    """The active features and error vectors at positions ``start:end``."""
    tcs, n_layers = model.transcoders, model.cfg.n_layers
    inputs = [x[start:end] for x in inputs]  # [chunk, d_model] a layer
    acts = torch.stack([tcs.encode(layer, inputs[layer]) for layer in range(n_layers)])
    zero = model.zero_positions  # a slice of the prompt's positions, here of the chunk's
    zero = slice(min(max(zero.start - start, 0), end - start), max(min(zero.stop, end) - start, 0))
    acts[:, zero] = 0  # [n_layers, chunk, d_transcoder]
    active = acts.nonzero()  # row-major: (layer, pos, feature) order
    values = acts[active.unbind(-1)]
    everything = torch.arange(tcs.d_transcoder, device=acts.device)
    errors = []
    for target in range(n_layers):
        writers = [i for i in range(target + 1) if target in tcs.writes_to(i)]
        reconstruction = tcs.decoder_bias(target) + tcs.skip(target, inputs[target])
        for i in writers:
            reconstruction = reconstruction + acts[i] @ tcs.decoder_vectors(i, everything, target)
        output = run.output_values[target][0, start:end]
        error = output - reconstruction.to(output.dtype)
        error[zero] = 0
        errors.append(error)
    active[:, 1] += start
    return Found(active, values, torch.stack(errors))
