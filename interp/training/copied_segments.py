"""The generated data the attention-only model trains on: random tokens with one segment
copied, and a loss mask over the predictions inside the copy.

Example:
    >>> tokens, mask = copied_segment_batch(32, 65, 512, torch.Generator(), 2, 24)
    >>> tokens.shape, mask.shape   # [batch, length], [batch, length - 1]
    (torch.Size([32, 65]), torch.Size([32, 64]))
"""

from __future__ import annotations

import torch
from jaxtyping import Float, Int
from torch import Tensor


def copied_segment_batch(
    batch_size: int,
    length: int,
    d_vocab: int,
    generator: torch.Generator,
    min_segment: int,
    max_segment: int,
) -> tuple[Int[Tensor, "batch length"], Float[Tensor, "batch length-1"]]:
    """Random tokens in which one segment of ``min_segment`` to ``max_segment`` tokens is
    copied once, at a random distance of 1 or more tokens after its start; and the loss
    mask [batch, length - 1] that keeps only the predictions made inside the copy (the
    current token and its target both copied), the only predictable ones. Token
    ``d_vocab - 1`` is a BOS at position 0 and appears nowhere else.

    The source ends at a uniformly random place in half the rows and, in the other half,
    ``r`` tokens before the last place it can end, with ``P(r)`` about ``1 / (r + 1)``. A
    copy closer than its length overlaps its source and repeats it periodically (distance 1
    is a run of one token). So the positions after source tokens, where an induction head
    reads and a previous-token head must work, cover the whole context, the last position
    included, about as often as the loss positions there.

    Example:
        >>> tokens, mask = copied_segment_batch(1, 12, 10, torch.Generator().manual_seed(0), 3, 3)
        >>> tokens, mask
        (tensor([[9, 0, 2, 6, 7, 2, 6, 7, 1, 0, 8, 2]]),
         tensor([[0., 0., 0., 0., 0., 1., 1., 0., 0., 0., 0.]]))
    """
    bos = d_vocab - 1
    tokens = torch.randint(0, bos, (batch_size, length), generator=generator)
    tokens[:, 0] = bos
    segment = torch.randint(min_segment, max_segment + 1, (batch_size, 1), generator=generator)
    uniform = torch.rand(batch_size, 3, generator=generator)
    # The source ends at segment + floor(place * span), in segment .. length - 2: its start
    # is 1 or later and its copy fits. place is uniform, or 1 - ((span + 1)^u - 1) / span.
    span = length - 1 - segment
    place = uniform[:, :1]
    near_end = 1 - ((span.double() + 1) ** place.double() - 1) / span.double()
    near_end = near_end.float().clamp(0, 0.999999)
    place = torch.where(uniform[:, 2:] < 0.5, near_end, place)
    source_end = segment + (place * span).long()
    # From the source's end to the copy's: 1 .. length - 1 - source_end.
    distance = 1 + (uniform[:, 1:2] * (length - 1 - source_end)).long()
    source_start = source_end - segment + 1
    copy_start = source_start + distance
    position = torch.arange(length)[None]
    in_copy = (position >= copy_start) & (position < copy_start + segment)  # [batch, length]
    # Token i of the copy is token i of the source, or of the copy itself when they overlap.
    source = torch.where(in_copy, source_start + (position - source_start) % distance, position)
    loss_mask = (in_copy[:, 1:] & in_copy[:, :-1]).float()
    return tokens.gather(1, source), loss_mask
