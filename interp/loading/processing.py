"""Weight processing: rewrite a model's weights without changing what it computes.

Each function edits a HookedTransformer in place and leaves its log-probabilities unchanged
(up to float rounding). Nothing here runs unless asked for: loaded models keep the exact
weights of their checkpoint, so their logits equal the original model's.

- ``fold_layer_norm``: each pre-norm's weight (and a layer norm's bias) moves into the layer
  that reads it (W_Q/W_K/W_V, W_in and W_gate, a mixture of experts' router and experts'
  W_gate and W_in, W_U); layer norms become ``"LNPre"`` (centre and scale only; the readers
  are then centred over d_model), RMS norms ``"RMSPre"`` (scale only).
  A "solu_ln" MLP's layer norm (``mlp.ln``, after the activation) folds into W_out
  and b_out the same way. Sandwich post-norms (``ln1_post``/``ln2_post``) and QK norms keep
  their weights: what follows them is a sum into the residual stream or a rotation, not a
  linear reader. Shortformer models cannot fold: their positions are added after ln1.
- ``center_writing_weights``: everything that writes to the residual stream (W_E, W_pos,
  W_O, b_O, W_out, b_out) gets zero mean over d_model; every reader centres its input anyway
  (layer-norm models only).
- ``center_unembed``: W_U and b_U get zero mean over the vocabulary; softmax ignores a shift
  (not with soft-capped logits: tanh does not).
- ``fold_value_biases``: b_V moves into b_O (attention patterns sum to 1 over keys).
- ``refactor_factored_attn_matrices``: W_Q/W_K (with their biases) and W_V/W_O are
  re-factored through an SVD of W_Q W_K^T and W_V W_O, keeping both products (models with
  learned positions and one key/value head per query head only).

``process_weights`` checks every requested step first and raises a ``ValueError`` naming the
step, the reason and the fix when one cannot apply, before any weight changes;
``skipped_steps`` says which steps TransformerLens would skip with a warning instead
(for shortformer models: fold_ln, center_writing_weights and center_unembed).
Processing happens in float32 (float64 for the refactor) and is cast back to the model's dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from interp.components.norms import applied_weight, make_norm


def _fold_ln_problem(model: Any) -> str | None:
    """Why the pre-norms cannot be folded into their readers, or None if they can (or are)."""
    cfg = model.cfg
    if cfg.normalization_type in ("LNPre", "RMSPre"):
        return None  # already folded
    if cfg.positional_embedding_type == "shortformer" and cfg.normalization_type is not None:
        return (
            "fold_ln cannot fold ln1 into W_Q/W_K of a shortformer model: its position "
            "embeddings are added after ln1, and folding would scale them too"
        )
    if cfg.use_post_norms_only:
        return (
            "fold_ln cannot fold OLMo 2's norms (use_post_norms_only): they normalise the "
            "attention and MLP outputs, so no layer reads them linearly"
        )
    if cfg.normalization_type not in ("LN", "LNPre", "RMS", "RMSPre"):
        return (
            f"fold_ln needs a model with layer norms or RMS norms (normalization_type "
            f"{cfg.normalization_type!r} has no weights to fold)"
        )
    if cfg.experts_mxfp4:
        return (
            "fold_ln cannot fold ln2 into experts kept in MXFP4 (cfg.experts_mxfp4): their "
            "weights are the checkpoint's 4-bit values; load with dequantize_experts=True to "
            "fold"
        )
    if cfg.normalization_type == "LN" and cfg.gated_mlp and not cfg.attn_only:
        biased = [i for i, block in enumerate(model.blocks) if block.ln2.b.any()]
        if biased:
            return (
                f"fold_ln cannot fold the bias of ln2 (blocks {biased}) into a gated MLP: "
                "act(x @ W_gate) * (x @ W_in) has no bias slot before the product"
            )
    return None


def _center_writing_problem(model: Any) -> str | None:
    if model.cfg.normalization_type not in ("LN", "LNPre"):
        return (
            "center_writing_weights needs layer norms (normalization_type 'LN' or 'LNPre'): "
            f"with {model.cfg.normalization_type!r} the residual stream's mean reaches the output"
        )
    return None


def _center_unembed_problem(model: Any) -> str | None:
    cap = model.cfg.output_logits_soft_cap
    if cap > 0:
        return (
            f"center_unembed shifts each position's logits by a constant, which the output "
            f"soft-cap (output_logits_soft_cap={cap}: cap * tanh(logits / cap)) does not ignore"
        )
    return None


def _refactor_problem(model: Any) -> str | None:
    cfg = model.cfg
    reasons = []
    if cfg.positional_embedding_type == "rotary":
        reasons.append("rotary embeddings rotate q and k between W_Q and W_K")
    if cfg.use_qk_norm:
        reasons.append("QK norms normalise q and k between W_Q and W_K")
    if (cfg.n_key_value_heads or cfg.n_heads) != cfg.n_heads:
        reasons.append("grouped key/value heads are shared by several query heads")
    if reasons:
        return (
            "refactor_factored_attn_matrices cannot keep W_Q W_K^T and W_V W_O per head here: "
            + "; ".join(reasons)
        )
    return None


@torch.no_grad()
def fold_layer_norm(model: Any, center_weights: bool = True) -> None:
    """Fold every pre-norm's weight (and a layer norm's bias) into the next layer; ``"LN"``
    becomes ``"LNPre"`` and ``"RMS"`` becomes ``"RMSPre"``. ``center_weights`` centres the
    readers of a layer norm over d_model (its output has zero mean, so it changes nothing);
    RMS norms do not centre, so their readers are never centred.

    Example:
        >>> chars = interp.load_model("shakespeare-char")   # layer norms ("LN")
        >>> fold_layer_norm(chars); chars.cfg.normalization_type
        'LNPre'
    """
    kind = model.cfg.normalization_type
    problem = _fold_ln_problem(model)
    if problem is not None:
        raise ValueError(f"{problem}; pass fold_ln=False.")
    if kind in ("LNPre", "RMSPre"):
        return  # already folded
    center_weights = center_weights and kind == "LN"
    for block in model.blocks:
        attn, ln1 = block.attn, block.ln1
        W_K, b_K, W_V, b_V = attn.key_value_weights()  # per key/value head
        for weight, bias in ((attn.W_Q, attn.b_Q), (W_K, b_K), (W_V, b_V)):
            # [n_heads, d_model, d_head] and [n_heads, d_head]
            _fold_into(ln1, weight, bias, center_weights, d_model_axis=1)
        if model.cfg.num_experts:  # the router and every expert read ln2 (no biases)
            for weight in block.mlp.input_weights():
                _fold_into(block.ln2, weight, None, center_weights, d_model_axis=0)
        elif not model.cfg.attn_only:
            mlp = block.mlp
            _fold_into(block.ln2, mlp.W_in, mlp.b_in, center_weights, d_model_axis=0)
            if model.cfg.gated_mlp:  # no gate bias: _fold_ln_problem checked ln2's is zero
                _fold_into(block.ln2, mlp.W_gate, None, center_weights, d_model_axis=0)
            if getattr(mlp.ln, "w", None) is not None:  # solu_ln's norm, over d_mlp
                _fold_into(mlp.ln, mlp.W_out, mlp.b_out, center_weights, d_model_axis=0)
    unembed = model.unembed
    _fold_into(model.ln_final, unembed.W_U, unembed.b_U, center_weights, d_model_axis=0)
    model.cfg.normalization_type = f"{kind}Pre"
    _replace_pre_norms(model)


def _fold_into(
    norm: Any, weight: Tensor, bias: Tensor | None, center_weights: bool, d_model_axis: int
) -> None:
    """Fold a norm's weight (``w``, or Gemma's ``1 + w``; and bias ``b``, for a layer norm)
    into a weight reading it along ``d_model_axis`` and its bias: W' = w * W,
    b' = b + b_norm @ W."""
    shape = [1] * weight.ndim
    shape[d_model_axis] = -1
    if bias is not None and getattr(norm, "b", None) is not None:
        # [d_model] against [..., d_model, d_out]: sum over d_model
        folded = torch.tensordot(
            norm.b.float().to(weight.device), weight.float().movedim(d_model_axis, 0), 1
        )
        bias.copy_(bias.float() + folded)
    new_weight = applied_weight(norm).float().to(weight.device).view(shape) * weight.float()
    if center_weights:
        new_weight = new_weight - new_weight.mean(dim=d_model_axis, keepdim=True)
    weight.copy_(new_weight)


def _replace_pre_norms(model: Any) -> None:
    """Swap ln1, ln2 and ln_final for the weightless norms ``cfg.normalization_type`` now
    names, keeping their hook points (and any hooks on them)."""
    for owner, name in _pre_norms(model):
        old = getattr(owner, name)
        new = make_norm(model.cfg, old.length)  # d_mlp for a SoLU MLP's ln
        new.hook_scale, new.hook_normalized = old.hook_scale, old.hook_normalized
        setattr(owner, name, new)
    model.setup()


def _pre_norms(model: Any) -> list[tuple[Any, str]]:
    """The norms whose weights fold into the next layer: ln1, ln2, ln_final, and the layer
    norm after a "solu_ln" activation (``mlp.ln``, over d_mlp) when it has weights."""
    norms = [(model, "ln_final")]
    for block in model.blocks:
        norms += [(block, "ln1")] if model.cfg.attn_only else [(block, "ln1"), (block, "ln2")]
        mlp_ln = getattr(block.mlp, "ln", None) if not model.cfg.attn_only else None
        if getattr(mlp_ln, "w", None) is not None:  # a mixture of experts has no such norm
            norms.append((block.mlp, "ln"))
    return norms


@torch.no_grad()
def center_writing_weights(model: Any) -> None:
    """Give every weight writing to the residual stream zero mean over d_model.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> center_writing_weights(chars); chars.W_E.mean(-1).abs().max() < 1e-6
        tensor(True)
    """
    problem = _center_writing_problem(model)
    if problem is not None:
        raise ValueError(f"{problem}; pass center_writing_weights=False.")
    writers = [model.embed.W_E]
    if model.cfg.positional_embedding_type == "standard":
        writers.append(model.pos_embed.W_pos)
    for block in model.blocks:
        writers += [block.attn.W_O, block.attn.b_O]
        if model.cfg.num_experts:
            writers += block.mlp.output_weights()
        elif not model.cfg.attn_only:
            writers += [block.mlp.W_out, block.mlp.b_out]
    for weight in writers:  # [..., d_model]
        weight.sub_(weight.float().mean(dim=-1, keepdim=True).to(weight.dtype))


@torch.no_grad()
def center_unembed(model: Any) -> None:
    """Give W_U [d_model, d_vocab] and b_U zero mean over the vocabulary.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> center_unembed(chars); chars.W_U.mean(-1).abs().max() < 1e-6
        tensor(True)
    """
    problem = _center_unembed_problem(model)
    if problem is not None:
        raise ValueError(f"{problem}; pass center_unembed=False.")
    for weight in (model.unembed.W_U, model.unembed.b_U):
        weight.sub_(weight.float().mean(dim=-1, keepdim=True).to(weight.dtype))


@torch.no_grad()
def fold_value_biases(model: Any) -> None:
    """Move b_V into b_O: b_O += sum over heads of b_V[h] @ W_O[h]; b_V becomes zero
    (with grouped-query attention, each key/value head's bias reaches every query head
    it serves).

    Exact because each query's attention weights sum to 1, so b_V reaches the output whole.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> fold_value_biases(chars); bool((chars.b_V == 0).all())
        True
    """
    for block in model.blocks:
        attn = block.attn
        folded = torch.einsum("hd,hdm->m", attn.b_V.float(), attn.W_O.float())
        attn.b_O.copy_(attn.b_O.float() + folded)
        attn.key_value_weights()[3].zero_()  # b_V as stored: [n_key_value_heads, d_head]


@torch.no_grad()
def refactor_factored_attn_matrices(model: Any) -> None:
    """Re-factor each head's QK and OV circuits through their SVDs, keeping both products.

    With U S V^T = [W_Q; b_Q] [W_K; b_K]^T (the biases as an extra input row),
    [W_Q; b_Q] = U S^1/2 and [W_K; b_K] = V S^1/2, so queries and keys share orthogonal,
    equally scaled directions. With U S V^T = W_V W_O, W_V = U S and W_O = V^T, so W_O is
    a rotation (orthonormal rows). b_V is folded into b_O first.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> refactor_factored_attn_matrices(chars)
        >>> W_O = chars.W_O[0, 0]   # [d_head, d_model]: orthonormal rows
        >>> torch.allclose(W_O @ W_O.T, torch.eye(chars.cfg.d_head), atol=1e-5)
        True
    """
    problem = _refactor_problem(model)
    if problem is not None:
        raise ValueError(f"{problem}; pass refactor_factored_attn_matrices=False.")
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


def _sinks_problem(model: Any) -> str | None:
    """Why ``fold_value_biases`` would be wrong with attention sinks (gpt-oss), or None."""
    if not model.cfg.use_attn_sinks:
        return None
    return (
        "fold_value_biases moves b_V into b_O, exact only when each query's pattern sums to "
        "1, but attention sinks (use_attn_sinks) take part of it"
    )


_STEPS = {  # in TransformerLens's order: (the step, why it cannot apply or None)
    "fold_ln": (fold_layer_norm, _fold_ln_problem),
    "center_writing_weights": (center_writing_weights, _center_writing_problem),
    "center_unembed": (center_unembed, _center_unembed_problem),
    "fold_value_biases": (fold_value_biases, lambda model: _sinks_problem(model)),
    "refactor_factored_attn_matrices": (refactor_factored_attn_matrices, _refactor_problem),
}
# The steps TransformerLens skips with a warning when the model cannot take them.
_SKIPPED_BY_TRANSFORMER_LENS = ("fold_ln", "center_writing_weights", "center_unembed")
_SHORTFORMER_SKIP = (
    "TransformerLens's from_pretrained skips {step} for shortformer models (fold_ln cannot "
    "apply: positions are added after ln1)"
)


def skipped_steps(model: Any, **wanted: bool) -> dict[str, str]:
    """The requested steps TransformerLens would skip on this model, with the reason:
    folding norms a model does not have, centring writing weights without layer norms,
    centring the unembedding of soft-capped logits. ``from_pretrained`` skips them with a
    warning, as TransformerLens does; ``process_weights`` refuses them.

    Example:
        >>> skipped_steps(model, fold_ln=True, center_writing_weights=True)   # no norms
        {'fold_ln': 'fold_ln needs a model with layer norms or RMS norms ...',
         'center_writing_weights': "center_writing_weights needs layer norms ..."}
    """
    reasons = {name: _STEPS[name][1](model) for name in _SKIPPED_BY_TRANSFORMER_LENS}
    if model.cfg.positional_embedding_type == "shortformer":
        for name in ("center_writing_weights", "center_unembed"):
            reasons[name] = reasons[name] or _SHORTFORMER_SKIP.format(step=name)
    reasons["fold_value_biases"] = _sinks_problem(model)  # skipped too: a fold would be wrong
    return {name: reason for name, reason in reasons.items() if wanted.get(name) and reason}


def process_weights(
    model: Any,
    fold_ln: bool = True,
    center_writing_weights: bool = True,
    center_unembed: bool = True,
    fold_value_biases: bool = True,
    refactor_factored_attn_matrices: bool = False,
) -> Any:
    """Apply the chosen processing steps in TransformerLens's order; returns ``model``.

    Every step is checked before any runs: one that cannot apply to this model (see the
    module docstring) is a ``ValueError`` naming it and the fix, and the weights are left
    as they were.

    Example:
        >>> chars = interp.load_model("shakespeare-char")
        >>> chars = process_weights(chars, fold_ln=True, center_writing_weights=False,
        ...                         center_unembed=False, fold_value_biases=False)
        >>> chars.cfg.normalization_type
        'LNPre'
        >>> process_weights(model)   # attn-only-2l has no layer norm to fold
        Traceback (most recent call last):
        ...
        ValueError: ...fold_ln...
    """
    wanted = {
        "fold_ln": fold_ln,
        "center_writing_weights": center_writing_weights,
        "center_unembed": center_unembed,
        "fold_value_biases": fold_value_biases,
        "refactor_factored_attn_matrices": refactor_factored_attn_matrices,
    }
    for name, (_, problem_of) in _STEPS.items():
        problem = problem_of(model) if wanted[name] else None
        if problem is not None:
            raise ValueError(f"{problem}; pass {name}=False.")
    for name, (step, _) in _STEPS.items():
        if wanted[name]:
            step(model)
    return model
