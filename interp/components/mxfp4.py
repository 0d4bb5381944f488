"""MXFP4 weights (the OCP microscaling format gpt-oss publishes its experts in), dequantized
as Hugging Face's ``integrations.mxfp4.convert_moe_packed_tensors`` does: at load, or per
expert in the forward (``interp.components.mxfp4_experts``).

A quantized ``[experts, rows, columns]`` weight is stored as two tensors:

- ``*_blocks``: uint8 [experts, rows, columns / 32, 16], each byte two FP4 (e2m1) values,
  the low nibble first (column ``2j``), the high nibble second (``2j + 1``);
- ``*_scales``: uint8 [experts, rows, columns / 32], one power-of-two exponent per block of
  32 values, biased by 127.

Value = ``FP4_VALUES[nibble] * 2 ** (scale - 127)``. The dequantized [experts, rows,
columns] is then transposed to [experts, columns, rows], the layout of Hugging Face's
``GptOssExperts`` parameters (``gate_up_proj`` [experts, d_model, 2 d_mlp], ``down_proj``
[experts, d_mlp, d_model]).

Example:
    >>> blocks = torch.full((1, 1, 1, 16), 0x21, dtype=torch.uint8)   # nibbles 1, 2: 0.5, 1.0
    >>> scales = torch.full((1, 1, 1), 127, dtype=torch.uint8)        # 2 ** 0
    >>> weight = dequantize_mxfp4(blocks, scales, torch.bfloat16)   # [E, columns, rows]
    >>> weight.shape, weight[0, :4, 0].tolist()
    (torch.Size([1, 32, 1]), [0.5, 1.0, 0.5, 1.0])
"""

from __future__ import annotations

import torch
from jaxtyping import Float, UInt8
from torch import Tensor

# The 16 values of an FP4 e2m1 nibble (sign bit, 2 exponent bits, 1 mantissa bit).
FP4_VALUES = (
    0.0,
    0.5,
    1.0,
    1.5,
    2.0,
    3.0,
    4.0,
    6.0,
    -0.0,
    -0.5,
    -1.0,
    -1.5,
    -2.0,
    -3.0,
    -4.0,
    -6.0,
)
SCALE_BIAS = 127
VALUES_PER_BLOCK = 32


def check_mxfp4_shapes(blocks: tuple[int, ...], scales: tuple[int, ...], what: str) -> None:
    """A ``ValueError`` naming ``what`` unless ``blocks`` is [..., n_blocks, 16] and
    ``scales`` [..., n_blocks] with the same leading sizes."""
    if len(blocks) < 2 or blocks[-1] != VALUES_PER_BLOCK // 2 or tuple(blocks[:-1]) != scales:
        raise ValueError(
            f"{what}: MXFP4 blocks of shape {tuple(blocks)} and scales of shape {tuple(scales)} "
            f"do not fit: the blocks must be [..., n_blocks, {VALUES_PER_BLOCK // 2}] (two 4-bit "
            "values a byte) and the scales [..., n_blocks] (one exponent a block of "
            f"{VALUES_PER_BLOCK})."
        )


def dequantized_shape(blocks: tuple[int, ...]) -> tuple[int, ...]:
    """The shape ``dequantize_mxfp4`` gives for blocks of shape ``blocks`` ([E, rows, G, 16]
    -> [E, G * 32, rows])."""
    *prefix, rows, n_blocks, _ = blocks
    return (*prefix, n_blocks * VALUES_PER_BLOCK, rows)


def dequantize_mxfp4(
    blocks: UInt8[Tensor, "experts rows n_blocks 16"],
    scales: UInt8[Tensor, "experts rows n_blocks"],
    dtype: torch.dtype = torch.bfloat16,
) -> Float[Tensor, "experts columns rows"]:
    """The weight ``blocks`` and ``scales`` encode, in ``dtype`` (rounded as Hugging Face's
    dequantizer into that dtype: the FP4 value in ``dtype``, times ``2 ** exponent``),
    transposed to [experts, columns, rows] (Hugging Face's expert parameter layout).

    Converted one expert at a time, so the index temporaries stay a fraction of the weight.
    """
    check_mxfp4_shapes(tuple(blocks.shape), tuple(scales.shape), "dequantize_mxfp4")
    if blocks.dtype != torch.uint8 or scales.dtype != torch.uint8:
        raise ValueError(
            f"MXFP4 blocks and scales are uint8, got {blocks.dtype} and {scales.dtype}."
        )
    lookup = torch.tensor(FP4_VALUES, dtype=dtype, device=blocks.device)
    *prefix, rows, n_blocks, half = blocks.shape
    flat_blocks = blocks.reshape(-1, rows, n_blocks, half)
    flat_scales = scales.reshape(-1, rows, n_blocks, 1)
    out = torch.empty(
        flat_blocks.shape[0], n_blocks * 2 * half, rows, dtype=dtype, device=blocks.device
    )
    for expert in range(flat_blocks.shape[0]):
        packed = flat_blocks[expert]
        values = torch.empty(rows, n_blocks, 2 * half, dtype=dtype, device=blocks.device)
        values[..., 0::2] = lookup[(packed & 0x0F).int()]
        values[..., 1::2] = lookup[(packed >> 4).int()]
        torch.ldexp(values, flat_scales[expert].int() - SCALE_BIAS, out=values)
        out[expert] = values.reshape(rows, -1).T
    return out.reshape(*prefix, n_blocks * 2 * half, rows)


# Every (scale, byte) pair's two values, per dtype and device: [256 * 256, 2].
_PAIR_TABLES: dict[tuple[torch.dtype, torch.device], Tensor] = {}


def _pair_table(dtype: torch.dtype, device: torch.device) -> Float[Tensor, "65536 2"]:
    """Row ``scale * 256 + byte``: the byte's low and high nibble values times ``2 **
    (scale - 127)``, computed by the operations of ``dequantize_mxfp4`` (the FP4 value in
    ``dtype``, then ``torch.ldexp`` into ``dtype``), so looking a value up gives the value
    ``dequantize_mxfp4`` computes."""
    key = (dtype, device)
    if key not in _PAIR_TABLES:
        lookup = torch.tensor(FP4_VALUES, dtype=dtype, device=device)
        byte = torch.arange(256, device=device)
        values = torch.empty(256, 256, 2, dtype=dtype, device=device)  # [scale, byte, nibble]
        values[..., 0] = lookup[byte & 0x0F]
        values[..., 1] = lookup[byte >> 4]
        exponents = torch.arange(256, device=device).int()[:, None, None] - SCALE_BIAS
        torch.ldexp(values, exponents, out=values)
        _PAIR_TABLES[key] = values.view(-1, 2)
    return _PAIR_TABLES[key]


def dequantize_rows(
    blocks: UInt8[Tensor, "rows n_blocks 16"],
    scales: UInt8[Tensor, "rows n_blocks"],
    dtype: torch.dtype = torch.bfloat16,
) -> Float[Tensor, "columns rows"]:
    """One expert's weight, as ``dequantize_mxfp4(blocks[None], scales[None], dtype)[0]``
    gives it (the same values, contiguous [columns, rows]), by one table look-up a byte
    instead of arithmetic a value: the dequantization of experts kept in MXFP4, in each
    forward.

    Example:
        >>> blocks = torch.randint(0, 256, (3, 2, 16), dtype=torch.uint8)
        >>> scales = torch.randint(120, 130, (3, 2), dtype=torch.uint8)
        >>> torch.equal(dequantize_rows(blocks, scales), dequantize_mxfp4(blocks, scales))
        True
    """
    check_mxfp4_shapes(tuple(blocks.shape), tuple(scales.shape), "dequantize_rows")
    rows = blocks.shape[0]
    index = scales.int()[..., None] * 256 + blocks.int()  # [rows, n_blocks, 16]
    pairs = _pair_table(dtype, blocks.device).index_select(0, index.view(-1))
    return pairs.view(rows, -1).T.contiguous()  # [columns, rows]
