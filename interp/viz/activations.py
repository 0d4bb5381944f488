"""Token-level activations on circuitsvis: each token coloured by a value (a neuron, a head).

The values come from any cached activation, e.g. ``cache["post", 0][0, :, neuron]`` for one
MLP neuron or ``cache["z", 1][0, :, head].norm(dim=-1)`` for one head's output size.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from jaxtyping import Float
from torch import Tensor

from interp.viz.circuitsvis_view import CircuitsVisView, circuitsvis_tokens


def token_activations(
    values: Float[Tensor, " pos"] | Float[Tensor, "pos n_values"],
    tokens: Sequence[str],
    labels: Sequence[str] | None = None,
) -> CircuitsVisView:
    """The prompt's tokens coloured by one value each, or by any of several (selectable).

    ``values`` is [pos] (one colouring) or [pos, n_values] (one button per column, named by
    ``labels``); ``tokens`` has ``pos`` string tokens.

    Example:
        >>> z = cache["z", 1][0, :, 0]                      # [pos, d_head]: head L1H0's mix
        >>> token_activations(z[:, :4], model.to_str_tokens(tokens),
        ...                   labels=[f"L1H0 z{i}" for i in range(4)])   # shows in a notebook
        CircuitsVisView('ColoredTokensMulti', props=[...])
    """
    values = torch.as_tensor(values).detach().to("cpu", torch.float32)
    tokens = circuitsvis_tokens(tokens)
    if values.ndim not in (1, 2) or values.shape[0] != len(tokens):
        raise ValueError(
            f"values must be [pos] or [pos, n_values] with pos = {len(tokens)} tokens; "
            f"got shape {tuple(values.shape)}."
        )
    if values.ndim == 1:
        return CircuitsVisView(
            "ColoredTokens", {"tokens": tokens, "values": values}, title="Token activations"
        )
    names = list(labels) if labels is not None else [str(i) for i in range(values.shape[1])]
    if len(names) != values.shape[1]:
        raise ValueError(f"Got {len(names)} labels for {values.shape[1]} columns of values.")
    props = {"tokens": tokens, "values": values, "labels": names}
    return CircuitsVisView("ColoredTokensMulti", props, title="Token activations")
