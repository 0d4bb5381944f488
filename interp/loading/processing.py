"""Weight processing: rewrite a model's weights without changing what it computes.

Each function edits a HookedTransformer in place and leaves its log-probabilities unchanged
(up to float rounding). Nothing here runs unless asked for: loaded models keep the exact
weights of their checkpoint, so their logits equal the original model's.

- ``fold_layer_norm``: each layer norm's weight and bias move into the layer that reads it
  (W_Q/W_K/W_V, W_in, W_U), whose weights are then centred over d_model; the norms become
  ``"LNPre"`` (centre and scale only).
- ``center_writing_weights``: everything that writes to the residual stream (W_E, W_pos,
  W_O, b_O, W_out, b_out) gets zero mean over d_model; every reader centres its input anyway.
- ``center_unembed``: W_U and b_U get zero mean over the vocabulary; softmax ignores a shift.
- ``fold_value_biases``: b_V moves into b_O (attention patterns sum to 1 over keys).
- ``refactor_factored_attn_matrices``: W_Q/W_K (with their biases) and W_V/W_O are
  re-factored through an SVD of W_Q W_K^T and W_V W_O, keeping both products.

Processing happens in float32 (float64 for the refactor) and is cast back to the model's dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


@torch.no_grad()
def fold_layer_norm(model: Any, center_weights: bool = True) -> None:
    """Fold every layer norm's weight and bias into the next layer; norms become ``"LNPre"``.

    Example:
        >>> fold_layer_norm(model); model.cfg.normalization_type
        'LNPre'
    """
    if model.cfg.normalization_type == "LNPre":
        return  # already folded
    if model.cfg.normalization_type != "LN":
        raise ValueError("fold_ln needs a model with layer norms (normalization_type='LN').")
    for block in model.blocks:
        attn, ln1 = block.attn, block.ln1
        for name in "QKV":
            weight = getattr(attn, f"W_{name}")  # [n_heads, d_model, d_head]
            bias = getattr(attn, f"b_{name}")  # [n_heads, d_head]
            new_bias = bias.float() + torch.einsum("m,hmd->hd", ln1.b.float(), weight.float())
            new_weight = ln1.w.float()[None, :, None] * weight.float()
            if center_weights:
                new_weight = new_weight - new_weight.mean(dim=1, keepdim=True)
            weight.copy_(new_weight)
            bias.copy_(new_bias)
        if not model.cfg.attn_only:
            _fold_into(block.ln2, block.mlp.W_in, block.mlp.b_in, center_weights)
    _fold_into(model.ln_final, model.unembed.W_U, model.unembed.b_U, center_weights)
    for layer_norm in _layer_norms(model):
        layer_norm.w = None
        layer_norm.b = None
    model.cfg.normalization_type = "LNPre"


def _fold_into(layer_norm: Any, weight: Tensor, bias: Tensor, center_weights: bool) -> None:
    """Fold a layer norm into the [d_model, d_out] weight and [d_out] bias reading from it."""
    new_bias = bias.float() + layer_norm.b.float() @ weight.float()
    new_weight = layer_norm.w.float()[:, None] * weight.float()
    if center_weights:
        new_weight = new_weight - new_weight.mean(dim=0, keepdim=True)
    weight.copy_(new_weight)
    bias.copy_(new_bias)


def _layer_norms(model: Any) -> list[Any]:
    norms = [model.ln_final]
    for block in model.blocks:
        norms += [block.ln1] if model.cfg.attn_only else [block.ln1, block.ln2]
    return norms


@torch.no_grad()
def center_writing_weights(model: Any) -> None:
    """Give every weight writing to the residual stream zero mean over d_model.

    Example:
        >>> center_writing_weights(model); model.W_E.mean(-1).abs().max() < 1e-6
        tensor(True)
    """
    if model.cfg.normalization_type not in ("LN", "LNPre"):
        raise ValueError(
            "center_writing_weights needs layer norms (normalization_type 'LN' or 'LNPre'): "
            "without them the residual stream's mean reaches the output."
        )
    writers = [model.embed.W_E, model.pos_embed.W_pos]
    for block in model.blocks:
        writers += [block.attn.W_O, block.attn.b_O]
        if not model.cfg.attn_only:
            writers += [block.mlp.W_out, block.mlp.b_out]
    for weight in writers:  # [..., d_model]
        weight.sub_(weight.float().mean(dim=-1, keepdim=True).to(weight.dtype))


@torch.no_grad()
def center_unembed(model: Any) -> None:
    """Give W_U [d_model, d_vocab] and b_U zero mean over the vocabulary.

    Example:
        >>> center_unembed(model); model.W_U.mean(-1).abs().max() < 1e-6
        tensor(True)
    """
    for weight in (model.unembed.W_U, model.unembed.b_U):
        weight.sub_(weight.float().mean(dim=-1, keepdim=True).to(weight.dtype))


@torch.no_grad()
def fold_value_biases(model: Any) -> None:
    """Move b_V into b_O: b_O += sum over heads of b_V[h] @ W_O[h]; b_V becomes zero.

    Exact because each query's attention weights sum to 1, so b_V reaches the output whole.

    Example:
        >>> fold_value_biases(model); bool((model.b_V == 0).all())
        True
    """
    for block in model.blocks:
        attn = block.attn
        folded = torch.einsum("hd,hdm->m", attn.b_V.float(), attn.W_O.float())
        attn.b_O.copy_(attn.b_O.float() + folded)
        attn.b_V.zero_()


@torch.no_grad()
def refactor_factored_attn_matrices(model: Any) -> None:
    """Re-factor each head's QK and OV circuits through their SVDs, keeping both products.

    With U S V^T = [W_Q; b_Q] [W_K; b_K]^T (the biases as an extra input row),
    [W_Q; b_Q] = U S^1/2 and [W_K; b_K] = V S^1/2, so queries and keys share orthogonal,
    equally scaled directions. With U S V^T = W_V W_O, W_V = U S and W_O = V^T, so W_O is
    a rotation (orthonormal rows). b_V is folded into b_O first.

    Example:
        >>> refactor_factored_attn_matrices(model)
        >>> torch.allclose(model.W_O[0, 0] @ model.W_O[0, 0].T, torch.eye(model.cfg.d_head))
        True
    """
    fold_value_biases(model)
    for block in model.blocks:
        attn = block.attn
        query = torch.cat([attn.W_Q, attn.b_Q[:, None, :]], dim=1).double()  # [h, m + 1, d]
        key = torch.cat([attn.W_K, attn.b_K[:, None, :]], dim=1).double()  # [h, m + 1, d]
        left, singular, right = _factored_svd(query, key)
        root = singular.sqrt()[:, None, :]
        new_query, new_key = left * root, right * root  # [h, m + 1, d]
        attn.W_Q.copy_(new_query[:, :-1])
        attn.b_Q.copy_(new_query[:, -1])
        attn.W_K.copy_(new_key[:, :-1])
        attn.b_K.copy_(new_key[:, -1])

        left, singular, right = _factored_svd(attn.W_V.double(), attn.W_O.double().mT)
        attn.W_V.copy_(left * singular[:, None, :])  # [h, m, d]
        attn.W_O.copy_(right.mT)  # [h, d, m]


def _factored_svd(first: Tensor, second: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The thin SVD U S V^T of ``first @ second^T`` for [batch, n, k] factors (k <= n),
    through QR so the n x n product is never formed: U, V [batch, n, k], S [batch, k]."""
    q_first, r_first = torch.linalg.qr(first)  # [b, n, k], [b, k, k]
    q_second, r_second = torch.linalg.qr(second)
    u, singular, vh = torch.linalg.svd(r_first @ r_second.mT)  # [b, k, k], [b, k], [b, k, k]
    return q_first @ u, singular, q_second @ vh.mT


_STEPS = {  # in TransformerLens's order
    "fold_ln": fold_layer_norm,
    "center_writing_weights": center_writing_weights,
    "center_unembed": center_unembed,
    "fold_value_biases": fold_value_biases,
    "refactor_factored_attn_matrices": refactor_factored_attn_matrices,
}


def process_weights(
    model: Any,
    fold_ln: bool = True,
    center_writing_weights: bool = True,
    center_unembed: bool = True,
    fold_value_biases: bool = True,
    refactor_factored_attn_matrices: bool = False,
) -> Any:
    """Apply the chosen processing steps in TransformerLens's order; returns ``model``.

    Example:
        >>> process_weights(model, fold_ln=True, center_writing_weights=False,
        ...                 center_unembed=False, fold_value_biases=False)
    """
    wanted = {
        "fold_ln": fold_ln,
        "center_writing_weights": center_writing_weights,
        "center_unembed": center_unembed,
        "fold_value_biases": fold_value_biases,
        "refactor_factored_attn_matrices": refactor_factored_attn_matrices,
    }
    for name, step in _STEPS.items():
        if wanted[name]:
            step(model)
    return model
