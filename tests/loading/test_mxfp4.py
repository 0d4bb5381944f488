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
