"""What each feature writes and its direct effect on the logits: decoder rows, residual
directions (through ``W_O`` for ``hook_z``), logit weights, top promoted/suppressed tokens
and per-prompt direct logit attribution.

Example:
    >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> feature_logit_weights(model, sae)[7].topk(3).indices  # the characters 7 promotes
    tensor([...])
    >>> [(char, round(weight, 2)) for char, weight in top_logits(model, sae, 7)["promoted"][:3]]
    [('y', 0.31), ('m', 0.3), ('s', 0.29)]
"""

from __future__ import annotations

from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.sae.features.indices import checked_count, checked_index, checked_token
from interp.sae.sae import SAE


def decoder_rows(sae: SAE) -> Float[Tensor, "d_sae d_out"]:
    """The rows a unit change of each feature adds at the output hook."""
    W_dec = sae.W_dec
    if sae.cfg.activation == "topk" and sae.cfg.rescale_acts_by_decoder_norm:
        W_dec = W_dec / W_dec.norm(dim=-1, keepdim=True)
    return W_dec


def feature_directions(model: Any, sae: SAE) -> Float[Tensor, "d_sae d_model"]:
    """Each feature's decoder direction as written into the residual stream: ``W_dec`` for
    SAEs on d_model-wide hooks (resid, attn_out, mlp_out), through ``W_O`` for ``hook_z``.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> feature_directions(model, sae).shape   # [d_sae, d_model]
        torch.Size([1024, 128])
    """
    W_dec = decoder_rows(sae).detach()
    hook = sae.cfg.output_hook
    layer = sae.cfg.hook_layer
    if hook.endswith("attn.hook_z") and layer is not None:
        W_O = model.blocks[layer].attn.W_O.detach()  # [n_heads, d_head, d_model]
        return torch.einsum("fhd,hdm->fm", W_dec.view(len(W_dec), *W_O.shape[:2]), W_O.to(W_dec))
    if W_dec.shape[-1] != model.cfg.d_model:
        raise ValueError(
            f"{sae!r} writes {W_dec.shape[-1]} wide at {hook!r}; logit weights and DLA need an "
            f"SAE whose output joins the residual stream (d_model={model.cfg.d_model}: resid, "
            "attn_out, mlp_out) or reads attn.hook_z."
        )
    return W_dec.to(model.W_U.dtype)


def _through_final_norm(model: Any, directions: Tensor) -> Tensor:
    """Directions through ``ln_final``'s linear part: centred (LayerNorm) and times its
    weight; the position-dependent scale is left out (or applied by the caller)."""
    norm = model.ln_final
    if model.cfg.normalization_type in ("LN", "LNPre"):
        directions = directions - directions.mean(-1, keepdim=True)
    weight = getattr(norm, "w", None)
    return directions * weight.detach() if weight is not None else directions


def feature_logit_weights(model: Any, sae: SAE) -> Float[Tensor, "d_sae d_vocab"]:
    """Each feature's direct effect on the logits per unit of activation: its residual
    direction through ``ln_final`` (centring and weight; not the scale) and ``W_U``.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> weights = feature_logit_weights(model, sae)[7]
        >>> model.to_str_tokens(weights.topk(5).indices)   # the tokens feature 7 promotes
        ['y', 'm', 's', 'Y', 'N']
    """
    directions = _through_final_norm(model, feature_directions(model, sae))
    return directions @ model.W_U.detach()


def top_logit_tokens(
    model: Any, sae: SAE, k: int = 10, features_per_chunk: int = 1024
) -> tuple[torch.return_types.topk, torch.return_types.topk]:
    """Every feature's ``k`` most promoted and ``k`` most suppressed tokens by logit weight
    (each ``values``/``indices`` [d_sae, k], float32), computed ``features_per_chunk``
    features at a time: never the whole d_sae x d_vocab matrix (5 GB for a 24k-feature SAE
    on GPT-2's vocabulary), at most features_per_chunk x d_vocab floats.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> promoted, suppressed = top_logit_tokens(model, sae, k=5)
        >>> promoted.indices.shape   # [d_sae, k]
        torch.Size([1024, 5])
        >>> model.to_str_tokens(promoted.indices[7])
        ['y', 'm', 's', 'Y', 'N']
    """
    k = min(checked_count(k, "k", minimum=1), model.cfg.d_vocab_out)
    with torch.no_grad():
        directions = _through_final_norm(model, feature_directions(model, sae))
        W_U = model.W_U.detach()
        ups, downs = [], []
        for chunk in directions.split(features_per_chunk):
            weights = (chunk @ W_U).float()  # [features_per_chunk, d_vocab]
            ups.append(weights.topk(k, dim=-1))
            downs.append(weights.topk(k, dim=-1, largest=False))

    def joined(parts: list) -> torch.return_types.topk:
        return torch.return_types.topk(
            (torch.cat([p.values for p in parts]), torch.cat([p.indices for p in parts]))
        )

    return joined(ups), joined(downs)


def top_logits(
    model: Any, sae: SAE, feature: int, k: int = 10, weights: Tensor | None = None
) -> dict[str, list[tuple[str, float]]]:
    """The ``k`` tokens feature ``feature`` promotes and suppresses most, with weights.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> [char for char, weight in top_logits(model, sae, 7)["promoted"][:3]]
        ['y', 'm', 's']
    """
    weights = feature_logit_weights(model, sae) if weights is None else weights
    n_features, d_vocab = weights.shape
    feature = checked_index(feature, n_features, "feature", f"{n_features} features")
    k = checked_count(k, "k")
    if k > d_vocab:
        raise ValueError(f"k={k} is more than the {d_vocab} tokens there are: pass k <= {d_vocab}.")
    row = weights[feature]
    up, down = row.topk(k), row.topk(k, largest=False)
    name = model.tokenizer.decode
    return {
        "promoted": [
            (name([int(i)]), float(v)) for v, i in zip(up.values, up.indices, strict=True)
        ],
        "suppressed": [
            (name([int(i)]), float(v)) for v, i in zip(down.values, down.indices, strict=True)
        ],
    }


@torch.no_grad()
def feature_dla(
    model: Any,
    sae: SAE,
    tokens: Int[Tensor, "1 pos"],
    answer: int,
    wrong_answer: int | None = None,
    position: int = -1,
) -> Float[Tensor, " d_sae"]:
    """Each feature's direct logit attribution at ``position``: activation x its direction
    through ``ln_final`` (with the run's own scale) x the unembedding of ``answer`` (minus
    ``wrong_answer``'s). With the error term and ``b_dec``, the features' DLAs sum to the
    SAE hook's own DLA.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model (char-level, no BOS)
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> dla = feature_dla(model, sae, model.to_tokens("ROMEO"), model.to_single_token("\\n"))
        >>> dla.shape, dla.topk(3).indices   # [d_sae]; the features that push "\\n" most
        (torch.Size([1024]), tensor([586, 904, 210]))
    """
    if tokens.ndim == 1:
        tokens = tokens[None]
    if tokens.ndim != 2 or len(tokens) != 1:
        raise ValueError(
            f"feature_dla takes one prompt, tokens [1, pos]; got shape {tuple(tokens.shape)}: "
            "call it once per prompt."
        )
    position = checked_index(position, tokens.shape[1], "position", f"{tokens.shape[1]} tokens")
    answer = checked_token(answer, model.cfg.d_vocab_out, "answer")
    if wrong_answer is not None:
        wrong_answer = checked_token(wrong_answer, model.cfg.d_vocab_out, "wrong_answer")
    tokens = tokens.to(model.device)
    hook = sae.cfg.hook_name
    _, cache = model.run_with_cache(tokens, names_filter=[hook, "ln_final.hook_scale"])
    acts = sae.encode(cache[hook])[0, position]  # [d_sae]
    unembed = model.W_U[:, answer]
    if wrong_answer is not None:
        unembed = unembed - model.W_U[:, wrong_answer]
    scale = cache["ln_final.hook_scale"][0, position] if "ln_final.hook_scale" in cache else 1.0
    directions = _through_final_norm(model, feature_directions(model, sae)) / scale
    return acts.to(directions) * (directions @ unembed)
