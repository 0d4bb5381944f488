"""Layer norm and RMS norm, with their scale and normalised output as hook points."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor, nn

from interp.config import HookedTransformerConfig
from interp.hooks import HookPoint


def _config(cfg: HookedTransformerConfig | dict) -> HookedTransformerConfig:
    """A config from a config or its dict (TransformerLens's components accept both)."""
    return (
        cfg if isinstance(cfg, HookedTransformerConfig) else HookedTransformerConfig.from_dict(cfg)
    )


class LayerNorm(nn.Module):
    """Layer norm whose scale (the root-mean-square after centring) is a hook point.

    ``normalization_type="LNPre"`` has no weight or bias: they were folded into the next layer
    (``weighted`` overrides that: True keeps them, False leaves them out).
    """

    def __init__(
        self,
        cfg: HookedTransformerConfig | dict,
        length: int | None = None,
        weighted: bool | None = None,
    ) -> None:
        super().__init__()
        cfg = _config(cfg)
        self.eps = cfg.eps
        self.length = cfg.d_model if length is None else length
        if weighted if weighted is not None else cfg.normalization_type == "LN":
            self.w = nn.Parameter(torch.ones(self.length, dtype=cfg.dtype))
            self.b = nn.Parameter(torch.zeros(self.length, dtype=cfg.dtype))
        else:
            self.w = self.b = None
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, d_model]

    def forward(self, x: Float[Tensor, "... d_model"]) -> Float[Tensor, "... d_model"]:
        if not (self.hook_scale.has_hooks or self.hook_normalized.has_hooks):
            return F.layer_norm(x, x.shape[-1:], self.w, self.b, self.eps)
        input_dtype = x.dtype
        x = x if x.dtype in (torch.float32, torch.float64) else x.float()
        w, b = (self.w.to(x.dtype), self.b.to(x.dtype)) if self.w is not None else (None, None)
        normalized, mean, rstd = torch.native_layer_norm(x, x.shape[-1:], w, b, self.eps)
        scale = self.hook_scale(rstd.reciprocal())  # [batch, pos, 1]: sqrt(variance + eps)
        if not self.hook_scale.only_read:  # a hook may change the scale: divide by what it gave
            normalized = (x - x.mean(-1, keepdim=True)) / scale  # native mean has no grad
            if w is not None:
                normalized = torch.addcmul(b, normalized, w)
        return self.hook_normalized(normalized.to(input_dtype))


class LayerNormPre(LayerNorm):
    """TransformerLens's ``LayerNormPre``: centre and divide by the scale, no weight or bias
    (they were folded into the next layer). ``hook_scale`` is [batch, pos, 1].

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=2, act_fn="relu",
        ...                               normalization_type="LNPre")
        >>> x = torch.randn(2, 3, 8)
        >>> torch.allclose(LayerNormPre(cfg)(x), F.layer_norm(x, (8,), eps=cfg.eps))
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, length: int | None = None) -> None:
        super().__init__(cfg, length, weighted=False)


class RMSNormPre(nn.Module):
    """TransformerLens's ``RMSNormPre``: ``x / sqrt(mean(x²) + eps)``, no weight (it was folded
    into the next layer). Half-precision inputs are normalised in float32, as Hugging Face
    does; the hooks see float32 and the output has the input's dtype. ``hook_scale`` is
    [batch, pos, 1], ``sqrt(mean(x²) + eps)``.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=2, act_fn="relu",
        ...                               normalization_type="RMSPre")
        >>> x = torch.randn(2, 3, 8)
        >>> expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps)
        >>> torch.allclose(RMSNormPre(cfg)(x), expected)
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, length: int | None = None) -> None:
        super().__init__()
        self.cfg = _config(cfg)
        self.eps = self.cfg.eps
        self.length = self.cfg.d_model if length is None else length
        self.hook_scale = HookPoint()  # [batch, pos, 1]
        self.hook_normalized = HookPoint()  # [batch, pos, length]

    def normalize(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        """The normalised input, in float32 for half-precision inputs (float64 stays)."""
        if x.dtype not in (torch.float32, torch.float64):
            x = x.float()
        inverse_scale = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        if not self.hook_scale.has_hooks:
            return self.hook_normalized(x * inverse_scale)  # Hugging Face's exact arithmetic
        scale = self.hook_scale(inverse_scale.reciprocal())  # [batch, pos, 1]
        if self.hook_scale.only_read:
            return self.hook_normalized(x * inverse_scale)
        return self.hook_normalized(x / scale)  # a hook may change the scale: divide by it

    def forward(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        return self.normalize(x).to(x.dtype)


class RMSNorm(RMSNormPre):
    """TransformerLens's ``RMSNorm`` (Llama's norm): ``RMSNormPre`` times a weight ``w``
    (``[length]``, ``d_model`` by default). ``hook_normalized`` is before the weight; as in
    Hugging Face's ``LlamaRMSNorm`` the normalised input is cast back to the input's dtype
    before it is multiplied by ``w``. With ``cfg.rmsnorm_uses_offset`` (Gemma) it scales by
    ``1 + w`` instead (``w`` starts at 0), multiplying in float32 and casting once, as
    ``Gemma2RMSNorm``/``Gemma3RMSNorm`` do; ``cfg.rmsnorm_weight_in_float32`` multiplies by
    ``w`` in float32 and casts once, as ``Olmo2RMSNorm`` does.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=2, act_fn="relu",
        ...                               normalization_type="RMS")
        >>> norm = RMSNorm(cfg)   # == transformers' LlamaRMSNorm with the same weight
        >>> _ = torch.nn.init.normal_(norm.w)
        >>> x = torch.randn(2, 3, 8)
        >>> expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps) * norm.w
        >>> torch.allclose(norm(x), expected)
        True
    """

    def __init__(self, cfg: HookedTransformerConfig | dict, length: int | None = None) -> None:
        super().__init__(cfg, length)
        self.offset = self.cfg.rmsnorm_uses_offset
        self.weight_in_float32 = self.cfg.rmsnorm_weight_in_float32
        init = torch.zeros if self.offset else torch.ones
        self.w = nn.Parameter(init(self.length, dtype=self.cfg.dtype))

    def forward(self, x: Float[Tensor, "... length"]) -> Float[Tensor, "... length"]:
        if self.offset:
            return (self.normalize(x) * (1.0 + self.w.float())).to(x.dtype)
        if self.weight_in_float32:  # OLMo 2's: multiplied in float32, then cast
            return (self.normalize(x) * self.w.float()).to(x.dtype)
        return self.normalize(x).to(x.dtype) * self.w


def applied_weight(norm: nn.Module) -> Float[Tensor, " length"] | None:
    """The weight a norm multiplies its normalised input by: ``w``, or ``1 + w`` in float32
    for an RMS norm with ``cfg.rmsnorm_uses_offset`` (Gemma); None for a norm without one.

    Example:
        >>> shakespeare = interp.load_model("shakespeare-char")   # LayerNorm with weights
        >>> applied_weight(shakespeare.ln_final).shape   # what folding ln_final into W_U uses
        torch.Size([128])
        >>> applied_weight(model.ln_final) is None   # attn-only-2l has no norm
        True
    """
    w = getattr(norm, "w", None)
    if w is not None and getattr(norm, "offset", False):
        return 1.0 + w.float()
    return w


def make_norm(
    cfg: HookedTransformerConfig, length: int | None = None, weighted: bool | None = None
) -> nn.Module:
    """The norm ``cfg.normalization_type`` names (``nn.Identity`` for None), over ``length``
    (default ``d_model``). ``weighted=True`` keeps the weights of a folded type ("LNPre" gives
    a "LN", "RMSPre" a "RMS"): sandwich post-norms are never folded.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=2, act_fn="relu",
        ...                               normalization_type="RMSPre")
        >>> type(make_norm(cfg)).__name__, type(make_norm(cfg, weighted=True)).__name__
        ('RMSNormPre', 'RMSNorm')
    """
    kind = cfg.normalization_type
    if kind is None:
        return nn.Identity()
    if weighted is None:
        weighted = not kind.endswith("Pre")
    if kind.startswith("RMS"):
        return RMSNorm(cfg, length) if weighted else RMSNormPre(cfg, length)
    return LayerNorm(cfg, length, weighted) if weighted else LayerNormPre(cfg, length)
