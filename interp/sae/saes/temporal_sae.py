"""``TemporalSAE`` (SAELens's ``temporal`` architecture; arXiv 2511.01836): each activation
``x_t`` of a sequence is split into what the context ``x_0..x_{t-1}`` predicts and a sparse
code of the rest.

Per attention layer, the running residual is encoded (``relu(lam * r @ W_enc)``, ``lam =
1 / (4 d_in)``), a causal attention over the previous positions' codes predicts the current
code ``z_pred_``, and the residual loses its projection on ``z_pred_ @ W_dec``. The last
residual's code (ReLU, optionally only its ``kval_topk`` largest) is the novel code that
``encode`` returns; ``forward`` decodes novel + predicted codes, ``decode`` the novel ones
only. ``tied_weights`` uses ``W_dec.T`` as the encoder (no ``W_enc``). Inputs are
``[batch, seq, d_in]``.

Example:
    >>> from interp.sae.saes.temporal_sae import TemporalSAE, TemporalSAEConfig
    >>> sae = TemporalSAE(TemporalSAEConfig(d_in=16, d_sae=32, n_heads=2,
    ...                                     bottleneck_factor=4, kval_topk=3))
    >>> x = torch.randn(2, 5, 16)                        # [batch, seq, d_in]
    >>> sae.encode(x).shape, (sae.encode(x) > 0).sum(-1).le(3).all().item(), sae(x).shape
    (torch.Size([2, 5, 32]), True, torch.Size([2, 5, 16]))
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.registry import register_sae_class
from interp.sae.sae import SAE, dtype_to_str, str_to_dtype

__all__ = ["ManualAttention", "TemporalSAE", "TemporalSAEConfig", "get_attention"]

logger = logging.getLogger(__name__)

# The base normalisations plus a fixed scale (``activation_normalization_factor``).
TEMPORAL_NORMALIZATIONS = (
    "none",
    "expected_average_only_in",
    "constant_norm_rescale",
    "constant_scalar_rescale",
    "layer_norm",
)


def get_attention(query: Tensor, key: Tensor) -> Tensor:
    """Causal softmax attention weights [..., L, S] of ``query`` [..., L, d] on ``key``."""
    n_query, n_key = query.size(-2), key.size(-2)
    future = ~torch.ones(n_query, n_key, dtype=torch.bool, device=query.device).tril()
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    return torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1)


def _scale_rows_(linear: nn.Linear, scale: float) -> None:
    """Give each output row of ``linear.weight`` the norm ``scale`` (in place)."""
    weight = linear.weight
    weight.copy_(scale * weight / (1e-6 + torch.linalg.norm(weight, dim=1, keepdim=True)))


class ManualAttention(nn.Module):
    """Multi-head causal attention from context codes (keys, values) to target codes
    (queries) at width ``dimin``, keys and queries of width ``dimin // bottleneck_factor``."""

    def __init__(
        self,
        dimin: int,
        n_heads: int = 4,
        bottleneck_factor: int = 64,
        bias_k: bool = True,
        bias_q: bool = True,
        bias_v: bool = True,
        bias_o: bool = True,
    ) -> None:
        super().__init__()
        assert dimin % (bottleneck_factor * n_heads) == 0, (
            f"dimin={dimin} must be a multiple of bottleneck_factor * n_heads = "
            f"{bottleneck_factor * n_heads}"
        )
        self.n_heads = n_heads
        self.n_embds = dimin // bottleneck_factor
        self.dimin = dimin
        self.k_ctx = nn.Linear(dimin, self.n_embds, bias=bias_k)
        self.q_target = nn.Linear(dimin, self.n_embds, bias=bias_q)
        self.v_ctx = nn.Linear(dimin, dimin, bias=bias_v)
        self.c_proj = nn.Linear(dimin, dimin, bias=bias_o)
        # Row norms matched to the codes' scale, as the paper's implementation does.
        with torch.no_grad():
            _scale_rows_(self.k_ctx, 1 / math.sqrt(self.n_embds // n_heads))
            _scale_rows_(self.q_target, 1 / math.sqrt(self.n_embds // n_heads))
            _scale_rows_(self.v_ctx, 1 / math.sqrt(dimin // n_heads))
            _scale_rows_(self.c_proj, 1 / math.sqrt(dimin))

    def _heads(self, x: Tensor, width: int) -> Tensor:
        batch, seq, _ = x.shape  # [batch, seq, width] -> [batch, n_heads, seq, width / n_heads]
        return x.view(batch, seq, self.n_heads, width // self.n_heads).transpose(1, 2)

    def forward(
        self, x_ctx: Tensor, x_target: Tensor, get_attn_map: bool = False
    ) -> tuple[Tensor, Tensor | None]:
        """The attention output [batch, seq, dimin] and, if asked, the attention map."""
        key = self._heads(self.k_ctx(x_ctx), self.n_embds)
        value = self._heads(self.v_ctx(x_ctx), self.dimin)
        query = self._heads(self.q_target(x_target), self.n_embds)
        attn_map = get_attention(query=query, key=key) if get_attn_map else None
        out = F.scaled_dot_product_attention(query, key, value, dropout_p=0, is_causal=True)
        batch, seq, _ = x_ctx.shape
        return self.c_proj(out.transpose(1, 2).contiguous().view(batch, seq, self.dimin)), attn_map


@dataclass
class TemporalSAEConfig(SAEConfig):
    """A temporal SAE: ``n_attn_layers`` attention layers of ``n_heads`` heads (keys of
    width ``d_sae // bottleneck_factor``), novel codes by ``sae_diff_type`` ("relu", or
    "topk" keeping ``kval_topk`` if set), and ``activation_normalization_factor`` for
    ``normalize_activations="constant_scalar_rescale"``."""

    architecture: str = ArchitectureName("temporal")
    n_heads: int = 8
    n_attn_layers: int = 1
    bottleneck_factor: int = 64
    sae_diff_type: str = "topk"
    kval_topk: int | None = None
    tied_weights: bool = True
    activation_normalization_factor: float = 1.0

    def _validate(self) -> None:
        if self.normalize_activations not in TEMPORAL_NORMALIZATIONS:
            raise ValueError(
                "normalize_activations must be none, expected_average_only_in, layer_norm, "
                "constant_norm_rescale, or constant_scalar_rescale. Got "
                f"{self.normalize_activations}"
            )
        if self.sae_diff_type not in ("relu", "topk"):
            raise ValueError(f"sae_diff_type={self.sae_diff_type!r}; use 'relu' or 'topk'.")
        k = self.kval_topk
        if k is not None and (not isinstance(k, int) or isinstance(k, bool) or k <= 0):
            raise ValueError(f"kval_topk={k!r}; use None (keep all) or a positive int.")
        # The base knows the other four normalisations: it checks the rest (d_in, d_sae,
        # reshape_activations) with "none" standing in for constant_scalar_rescale.
        mode = self.normalize_activations
        if mode == "constant_scalar_rescale":
            self.normalize_activations = "none"
        try:
            super()._validate()
        finally:
            self.normalize_activations = mode


class TemporalSAE(SAE):
    """The temporal SAE (see the module docstring): ``encode`` gives the novel codes,
    ``encode_with_predictions`` also the predicted ones, ``forward`` reconstructs from both.
    ``use_error_term`` is not applied (as SAELens's ``TemporalSAE.forward``)."""

    def __init__(self, cfg: TemporalSAEConfig, use_error_term: bool = False) -> None:
        super().__init__(cfg, use_error_term)
        kind = {"device": self.device, "dtype": self.dtype}
        self.attn_layers = nn.ModuleList(
            ManualAttention(cfg.d_sae, cfg.n_heads, cfg.bottleneck_factor).to(**kind)
            for _ in range(cfg.n_attn_layers)
        )
        self.eps = 1e-6
        self.lam = 1 / (4 * cfg.d_in)

    @property
    def dtype(self) -> torch.dtype:
        return self.W_dec.dtype  # a tied temporal SAE has no W_enc

    @property
    def device(self) -> torch.device:
        return self.W_dec.device

    def to(self, *args: Any, **kwargs: Any) -> TemporalSAE:
        """``nn.Module.to``, keeping ``cfg.dtype`` and ``cfg.device`` in step (from ``W_dec``:
        the base reads ``W_enc``, which a tied temporal SAE lacks)."""
        out = nn.Module.to(self, *args, **kwargs)
        self.cfg.dtype = dtype_to_str(self.W_dec.dtype)
        self.cfg.device = str(self.W_dec.device)
        return out

    def initialize_weights(self) -> None:
        """Gaussian ``W_dec`` [d_sae, d_in] (and ``W_enc`` [d_in, d_sae] when untied), zero
        ``b_dec``; no ``b_enc``."""
        cfg = self.cfg
        kind = {"dtype": str_to_dtype(cfg.dtype), "device": torch.device(cfg.device)}
        self.W_dec = nn.Parameter(torch.randn(cfg.d_sae, cfg.d_in, **kind))
        self.b_dec = nn.Parameter(torch.zeros(cfg.d_in, **kind))
        if not cfg.tied_weights:
            self.W_enc = nn.Parameter(torch.randn(cfg.d_in, cfg.d_sae, **kind))

    def _normalize_in(self, x: Tensor) -> Tensor:
        if self.cfg.normalize_activations == "constant_scalar_rescale":
            return x * self.cfg.activation_normalization_factor
        return super()._normalize_in(x)

    def _normalize_out(self, x: Tensor) -> Tensor:
        if self.cfg.normalize_activations == "constant_scalar_rescale":
            return x / self.cfg.activation_normalization_factor
        return super()._normalize_out(x)

    run_time_activation_norm_fn_in = _normalize_in  # SAELens's names
    run_time_activation_norm_fn_out = _normalize_out

    def _encoder(self) -> Tensor:
        return self.W_dec.T if self.cfg.tied_weights else self.W_enc  # [d_in, d_sae]

    def encode_with_predictions(self, x: Tensor, hooked: bool = True) -> tuple[Tensor, Tensor]:
        """The novel codes and the context-predicted codes of ``x`` [batch, seq, d_in],
        both [batch, seq, d_sae]."""
        residual = self.process_sae_in(x, hooked)
        W_enc = self._encoder()
        z_pred = residual.new_zeros(*residual.shape[:2], self.cfg.d_sae)  # [batch, seq, d_sae]
        for attn_layer in self.attn_layers:
            z_input = F.relu((residual * self.lam) @ W_enc)  # [batch, seq, d_sae]
            # position t attends to the codes of positions < t: shift right by one
            z_ctx = torch.cat((torch.zeros_like(z_input[:, :1]), z_input[:, :-1]), dim=1)
            layer_pred = F.relu(attn_layer(z_ctx, z_input)[0])
            decoded = layer_pred @ self.W_dec  # [batch, seq, d_in]
            norm = decoded.norm(dim=-1, keepdim=True) + self.eps
            proj_scale = (decoded * residual).sum(dim=-1, keepdim=True) / norm.pow(2)
            z_pred = z_pred + layer_pred * proj_scale
            residual = residual - proj_scale * decoded
        hidden_pre = self._hook("hook_sae_acts_pre", (residual * self.lam) @ W_enc, hooked)
        z_novel = F.relu(hidden_pre)
        if self.cfg.sae_diff_type == "topk" and self.cfg.kval_topk is not None:
            kept = torch.topk(z_novel, self.cfg.kval_topk, dim=-1).indices
            z_novel = z_novel * torch.zeros_like(z_novel).scatter_(-1, kept, 1)
        return self._hook("hook_sae_acts_post", z_novel, hooked), z_pred

    def encode(self, x: Tensor, hooked: bool = True) -> Tensor:
        """The novel codes [batch, seq, d_sae] (the features)."""
        return self.encode_with_predictions(x, hooked)[0]

    def _decode_codes(self, codes: Tensor) -> Tensor:
        out = codes @ self.W_dec
        if not self.cfg.tied_weights or self.cfg.apply_b_dec_to_input:
            out = out + self.b_dec
        return out

    def decode(self, feature_acts: Tensor, hooked: bool = True) -> Tensor:
        """The novel codes' part of the reconstruction only (the predicted part is missing:
        use ``forward`` for the whole)."""
        out = self._hook("hook_sae_recons", self._decode_codes(feature_acts), hooked)
        out = self.reshape_fn_out(self._normalize_out(out), self.d_head)
        logger.warning(
            "NOTE this only decodes x_novel. The x_pred is missing, so we're not "
            "reconstructing the full x."
        )
        return out

    def forward(self, x: Tensor) -> Tensor:
        """The reconstruction [batch, seq, d_in] from the novel plus predicted codes."""
        z_novel, z_pred = self.encode_with_predictions(x)
        out = self._normalize_out(self._decode_codes(z_novel + z_pred))
        return self.hook_sae_output(self.reshape_fn_out(out, self.d_head))

    def fold_W_dec_norm(self) -> None:
        raise NotImplementedError("Folding W_dec_norm is not supported for TemporalSAE")

    def fold_activation_norm_scaling_factor(self, scaling_factor: float) -> None:
        raise NotImplementedError(
            "Folding activation norm scaling factor is not supported for TemporalSAE"
        )


register_sae_class("temporal", TemporalSAE, TemporalSAEConfig)
