"""MXFP4 expert weights (gpt-oss's published format) dequantize as Hugging Face's do."""

import pytest
import torch

from interp.loading.mxfp4 import dequantize_mxfp4, dequantized_shape

mxfp4 = pytest.importorskip("transformers.integrations.mxfp4")


def random_mxfp4(experts: int, rows: int, n_blocks: int, seed: int = 0):
    """Blocks and scales as gpt-oss's checkpoints lay them out, with random content: every
    nibble value, and exponents around the bias (127) both ways."""
    generator = torch.Generator().manual_seed(seed)
    blocks = torch.randint(0, 256, (experts, rows, n_blocks, 16), generator=generator)
    scales = torch.randint(127 - 12, 127 + 6, (experts, rows, n_blocks), generator=generator)
    return blocks.to(torch.uint8), scales.to(torch.uint8)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_dequantized_as_hugging_face_dequantizes(dtype):
    blocks, scales = random_mxfp4(experts=3, rows=10, n_blocks=2)
    ours = dequantize_mxfp4(blocks, scales, dtype)
    theirs = mxfp4.convert_moe_packed_tensors(blocks.clone(), scales.clone(), dtype=dtype)
    assert ours.shape == theirs.shape == dequantized_shape(tuple(blocks.shape)) == (3, 64, 10)
    assert ours.dtype == dtype
    torch.testing.assert_close(ours, theirs, rtol=0, atol=0)


def test_the_documented_layout_by_hand():
    """Low nibble first, value times 2 ** (scale - 127), transposed to [E, columns, rows]."""
    blocks = torch.zeros(1, 1, 1, 16, dtype=torch.uint8)
    blocks[0, 0, 0, 0] = 0x92  # low nibble 2 (+1.0), high nibble 9 (-0.5)
    blocks[0, 0, 0, 15] = 0x07  # low nibble 7 (+6.0), high nibble 0
    scales = torch.full((1, 1, 1), 129, dtype=torch.uint8)  # 2 ** 2
    weight = dequantize_mxfp4(blocks, scales, torch.float32)
    assert weight.shape == (1, 32, 1)
    expected = torch.zeros(32)
    expected[0], expected[1], expected[30] = 4.0, -2.0, 24.0
    assert torch.equal(weight[0, :, 0], expected)


def test_mismatched_blocks_and_scales_are_named():
    blocks, scales = random_mxfp4(experts=1, rows=4, n_blocks=2)
    with pytest.raises(ValueError, match=r"blocks of shape \(1, 4, 2, 16\) and scales of shape"):
        dequantize_mxfp4(blocks, scales[..., :1])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_per_expert_table_equals_the_dequantizer_on_every_scale_and_byte(dtype):
    """``dequantize_rows`` (a table look-up, used in the forward of experts kept in MXFP4)
    against ``dequantize_mxfp4`` on all 256 scales times all 256 bytes, bit for bit (signed
    zeros, and the NaN and inf of exponents past the dtype's range, included)."""
    from interp.components.mxfp4 import dequantize_rows

    every_byte = torch.arange(256, dtype=torch.uint8).view(1, 16, 16)
    blocks = every_byte.expand(256, 16, 16).contiguous()  # [rows, n_blocks, 16]
    scales = torch.arange(256, dtype=torch.uint8)[:, None].expand(256, 16).contiguous()
    ours = dequantize_rows(blocks, scales, dtype)
    expected = dequantize_mxfp4(blocks[None], scales[None], dtype)[0]
    assert ours.is_contiguous() and ours.shape == expected.shape == (512, 256)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    assert torch.equal(ours.view(bits), expected.view(bits))
