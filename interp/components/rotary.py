"""Rotary position embeddings: rotate the first ``rotary_dim`` dimensions of each query and
key head by angles ``position * frequency``, so their dot products depend on relative position.

The frequencies, angles, cosines and sines are computed in float32 exactly as Hugging Face
does (``transformers.modeling_rope_utils``), then cast to the queries' dtype for the rotation,
so a bf16 model rotates bit for bit as Hugging Face's bf16 model does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.config import HookedTransformerConfig


@dataclass(frozen=True)
class Llama3Scaling:
    """Llama 3.1's "NTK-by-parts" rescaling of the frequencies (``rope_type="llama3"``)."""

    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_context_length: int = 8192


def inverse_frequencies(
    rotary_dim: int,
    base: float,
    linear_factor: float = 1.0,
    llama3: Llama3Scaling | None = None,
) -> Float[Tensor, " half_rotary_dim"]:
    """The rotation frequencies ``base ** (-2i / rotary_dim)`` in float32, optionally divided
    by ``linear_factor`` (Hugging Face's "linear" scaling: positions / factor) or rescaled by
    Llama 3's NTK-by-parts rule (Hugging Face's ``_compute_llama3_parameters``).

    Example:
        >>> inverse_frequencies(4, 10000.0)
        tensor([1.0000, 0.0100])
    """
    # On the CPU even inside ``torch.device("meta")`` (loaders build models there): the
    # frequencies are not a parameter, so loading the weights would not replace them.
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device="cpu").float() / rotary_dim
    inv_freq = 1.0 / (float(base) ** exponents)
    if linear_factor != 1.0:
        inv_freq = inv_freq / linear_factor
    if llama3 is not None:
        inv_freq = _llama3_frequencies(inv_freq, llama3)
    return inv_freq


def _llama3_frequencies(inv_freq: Tensor, scaling: Llama3Scaling) -> Tensor:
    """Long wavelengths are divided by the factor, short ones kept, those in between blended."""
    old_context = scaling.original_context_length
    low_freq_wavelen = old_context / scaling.low_freq_factor
    high_freq_wavelen = old_context / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_context / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


@dataclass(frozen=True)
class LongRopeScaling:
    """Phi 3's LongRoPE (``rope_type="longrope"``) beyond the short frequencies a rotary
    embedding holds: ``long_inv_freq``, used instead when a call's largest position is past
    ``original_context_length`` (chosen on each call, as Hugging Face chooses), and the
    ``attention_factor`` that multiplies every cosine and sine."""

    long_inv_freq: Tensor
    original_context_length: int
    attention_factor: float = 1.0


def longrope_frequencies(
    rotary_dim: int, base: float, factors: tuple[float, ...]
) -> Float[Tensor, " half_rotary_dim"]:
    """``1 / (factor_i * base ** (2i / rotary_dim))`` in float32, as Hugging Face's
    ``_compute_longrope_parameters``."""
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device="cpu").float() / rotary_dim
    return 1.0 / (
        torch.tensor(factors, dtype=torch.float32, device="cpu") * float(base) ** exponents
    )


def yarn_frequencies(
    rotary_dim: int,
    base: float,
    factor: float,
    original_context_length: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
    truncate: bool = True,
) -> Float[Tensor, " half_rotary_dim"]:
    """YaRN's frequencies (``rope_type="yarn"``, gpt-oss), as Hugging Face's
    ``_compute_yarn_parameters``: frequency ``i`` is ``base ** (-2i / rotary_dim)`` blended
    with that over ``factor`` by a linear ramp between the dimensions that turn
    ``beta_fast`` and ``beta_slow`` times within ``original_context_length`` (fast ones kept,
    slow ones interpolated; ``truncate`` rounds the band's ends outwards)."""

    def correction_dim(rotations: float) -> float:
        turns = original_context_length / (rotations * 2 * math.pi)
        return rotary_dim * math.log(turns) / (2 * math.log(base))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, rotary_dim - 1)
    if low == high:
        high += 0.001  # as Hugging Face: no zero-width ramp
    exponents = torch.arange(0, rotary_dim, 2, dtype=torch.int64, device="cpu").float() / rotary_dim
    pos_freqs = float(base) ** exponents
    extrapolation, interpolation = 1.0 / pos_freqs, 1.0 / (factor * pos_freqs)
    ramp = (torch.arange(rotary_dim // 2, dtype=torch.float32, device="cpu") - low) / (high - low)
    kept = 1 - torch.clamp(ramp, 0, 1)  # 1: the unscaled frequency, 0: the interpolated one
    return interpolation * (1 - kept) + extrapolation * kept


class RotaryEmbedding:
    """Rotates the first ``rotary_dim`` dimensions of each head; the rest pass through
    (with ``longrope``, Phi 3's LongRoPE picks the frequencies on each call; ``in_float32``
    rotates half-precision inputs in float32 and casts once, as OLMo 2 does).

    ``adjacent_pairs=False`` rotates dimension ``i`` with ``i + rotary_dim / 2`` (GPT-NeoX,
    Llama, Hugging Face's ``rotate_half``); ``True`` rotates ``2i`` with ``2i + 1`` (GPT-J).
    The cosines and sines are computed from the positions on each call, in float32, as
    Hugging Face does: any position works, and no table has to be kept on each device.

    Example:
        >>> rotary = RotaryEmbedding(inverse_frequencies(4, 10000.0))   # rotary_dim 4
        >>> q = torch.randn(1, 3, 2, 4)   # [batch, pos, n_heads, d_head]
        >>> rotated = rotary(q, torch.arange(3)[None])   # positions [1, pos]
        >>> rotated.shape
        torch.Size([1, 3, 2, 4])
        >>> torch.equal(rotated[:, 0], q[:, 0])   # position 0 is not rotated
        True
        >>> torch.allclose(rotated.norm(dim=-1), q.norm(dim=-1))   # a rotation keeps lengths
        True
    """

    def __init__(
        self,
        inv_freq: Float[Tensor, " half_rotary_dim"],
        adjacent_pairs: bool = False,
        longrope: LongRopeScaling | None = None,
        in_float32: bool = False,
        attention_factor: float = 1.0,
    ):
        self.inv_freq = inv_freq
        self.rotary_dim = 2 * inv_freq.shape[0]
        self.adjacent_pairs = adjacent_pairs
        self._on_device: dict[torch.device, Tensor] = {}
        self.longrope = longrope  # LongRoPE: inv_freq holds the short factors' frequencies
        self.in_float32 = in_float32  # half precision rotated in float32, cast once (OLMo 2)
        self._long_on_device: dict[torch.device, Tensor] = {}
        self.attention_factor = attention_factor  # YaRN's multiplier of the cosines and sines

    @classmethod
    def from_config(
        cls, cfg: HookedTransformerConfig, layer_index: int, is_local: bool | None = None
    ) -> RotaryEmbedding:
        """The rotary embedding of layer ``layer_index``: a "local" layer (``is_local``,
        default: its entry of ``cfg.attn_types``) of a config with ``rotary_base_local``
        (Gemma 3) uses that base and no scaling; every other layer uses ``rotary_base`` with
        the config's scaling (NTK-by-parts or linear)."""
        if is_local is None:
            is_local = cfg.use_local_attn and cfg.attn_types[layer_index] == "local"
        is_local_base = is_local and cfg.rotary_base_local is not None
        if is_local_base:
            inv_freq = inverse_frequencies(cfg.rotary_dim, cfg.rotary_base_local)
        else:
            llama3 = None
            if cfg.use_NTK_by_parts_rope:
                llama3 = Llama3Scaling(
                    cfg.NTK_by_parts_factor,
                    cfg.NTK_by_parts_low_freq_factor,
                    cfg.NTK_by_parts_high_freq_factor,
                    cfg.NTK_original_ctx_len,
                )
            inv_freq = inverse_frequencies(
                cfg.rotary_dim, cfg.rotary_base, cfg.rotary_scaling_factor, llama3
            )
        if cfg.longrope_short_factor is not None and not is_local_base:
            inv_freq = longrope_frequencies(
                cfg.rotary_dim, cfg.rotary_base, tuple(cfg.longrope_short_factor)
            )
            long_inv_freq = longrope_frequencies(
                cfg.rotary_dim, cfg.rotary_base, tuple(cfg.longrope_long_factor)
            )
            longrope = LongRopeScaling(
                long_inv_freq, cfg.longrope_original_ctx_len, cfg.longrope_attention_factor
            )
            return cls(inv_freq, cfg.rotary_adjacent_pairs, longrope, cfg.rotary_in_float32)
        if cfg.use_yarn_rope and not is_local_base:
            inv_freq = yarn_frequencies(
                cfg.rotary_dim,
                cfg.rotary_base,
                cfg.yarn_factor,
                cfg.yarn_original_ctx_len,
                cfg.yarn_beta_fast,
                cfg.yarn_beta_slow,
                cfg.yarn_truncate,
            )
            return cls(
                inv_freq,
                cfg.rotary_adjacent_pairs,
                in_float32=cfg.rotary_in_float32,
                attention_factor=cfg.yarn_attention_factor,
            )
        return cls(inv_freq, cfg.rotary_adjacent_pairs, in_float32=cfg.rotary_in_float32)

    def cos_sin(
        self, positions: Int[Tensor, "batch_or_1 pos"], dtype: torch.dtype
    ) -> tuple[
        Float[Tensor, "batch_or_1 pos 1 rotary_dim"], Float[Tensor, "batch_or_1 pos 1 rotary_dim"]
    ]:
        """Cosines and sines of the angles at ``positions`` (float32, then cast to ``dtype``),
        laid out to multiply a [batch, pos, n_heads, rotary_dim] tensor."""
        frequencies, on_device = self.inv_freq, self._on_device
        longrope = self.longrope
        if longrope is not None and int(positions.max()) >= longrope.original_context_length:
            frequencies, on_device = longrope.long_inv_freq, self._long_on_device
        inv_freq = on_device.get(positions.device)
        if inv_freq is None:
            inv_freq = on_device.setdefault(positions.device, frequencies.to(positions.device))
        angles = positions[..., None].float() * inv_freq  # [batch_or_1, pos, rotary_dim / 2]
        if self.adjacent_pairs:
            angles = angles.repeat_interleave(2, dim=-1)
        else:
            angles = torch.cat([angles, angles], dim=-1)
        cos, sin = angles.cos(), angles.sin()
        if longrope is not None:
            cos, sin = cos * longrope.attention_factor, sin * longrope.attention_factor
        elif self.attention_factor != 1.0:  # YaRN
            cos, sin = cos * self.attention_factor, sin * self.attention_factor
        return cos[:, :, None].to(dtype), sin[:, :, None].to(dtype)

    def __call__(
        self,
        x: Float[Tensor, "batch pos n_heads d_head"],
        positions: Int[Tensor, "batch_or_1 pos"],
    ) -> Float[Tensor, "batch pos n_heads d_head"]:
        half = x.dtype in (torch.float16, torch.bfloat16)
        cos, sin = self.cos_sin(positions, torch.float32 if self.in_float32 and half else x.dtype)
        rotating, passing = x[..., : self.rotary_dim], x[..., self.rotary_dim :]
        rotated = (rotating * cos + self._rotate(rotating) * sin).to(x.dtype)
        return torch.cat([rotated, passing], dim=-1) if passing.shape[-1] else rotated

    def _rotate(self, x: Tensor) -> Tensor:
        """The partner of each dimension, negated where it leads: (x1, x2) -> (-x2, x1)."""
        if self.adjacent_pairs:
            return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
        half = x.shape[-1] // 2
        return torch.cat([-x[..., half:], x[..., :half]], dim=-1)
