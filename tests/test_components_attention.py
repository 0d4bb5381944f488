"""Rotary embeddings and attention against Hugging Face's own modules, and the fused
(scaled_dot_product_attention) path against the explicit, hookable one."""

from __future__ import annotations

import pytest
import torch
from transformers import Gemma3TextConfig, GPTNeoXConfig, LlamaConfig
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.gptj import modeling_gptj as hf_gptj
from transformers.models.llama import modeling_llama as hf_llama

from interp.components.rotary import Llama3Scaling, RotaryEmbedding, inverse_frequencies
from interp.config import HookedTransformerConfig

# Positions of a left-padded batch (HF: cumsum - 1), and far past any n_ctx.
POSITIONS = torch.tensor([[0, 0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6]])
FAR_POSITIONS = torch.tensor([[5000, 9000, 131071]])


def hf_rotate(rotary_emb, apply, q, positions, **kwargs):
    """Hugging Face's rotation of q [batch, pos, n_heads, d_head] (it runs head-major)."""
    cos, sin = rotary_emb(q, positions, **kwargs)
    rotated, _ = apply(q.transpose(1, 2), q.transpose(1, 2), cos, sin)
    return rotated.transpose(1, 2)


LLAMA_ROPE = {
    "default": {"rope_type": "default", "rope_theta": 500000.0},
    "llama3": {
        "rope_type": "llama3",
        "rope_theta": 500000.0,
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        # Short, so that the 16 frequencies of d_head 32 span all three bands.
        "original_max_position_embeddings": 64,
    },
    "linear": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
}


@pytest.mark.parametrize("rope", list(LLAMA_ROPE))
@pytest.mark.parametrize("positions", [POSITIONS, FAR_POSITIONS], ids=["padded", "far"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rotary_equals_llama(rope, positions, dtype):
    config = LlamaConfig(
        hidden_size=64, num_attention_heads=2, head_dim=32, rope_parameters=LLAMA_ROPE[rope]
    )
    hf = hf_llama.LlamaRotaryEmbedding(config)
    base = LLAMA_ROPE[rope]["rope_theta"]
    if rope == "llama3":
        inv_freq = inverse_frequencies(32, base, llama3=Llama3Scaling(8.0, 1.0, 4.0, 64))
    else:
        inv_freq = inverse_frequencies(32, base, linear_factor=4.0 if rope == "linear" else 1.0)
    ours = RotaryEmbedding(inv_freq)
    torch.testing.assert_close(ours.inv_freq, hf.inv_freq, atol=0, rtol=0)
    q = torch.randn(positions.shape[0], positions.shape[1], 2, 32).to(dtype)
    expected = hf_rotate(hf, hf_llama.apply_rotary_pos_emb, q, positions)
    torch.testing.assert_close(ours(q, positions), expected, atol=1e-6, rtol=0)


def test_llama3_scaling_bites():
    """The test above covers all three bands: kept, divided and blended frequencies."""
    plain = inverse_frequencies(32, 500000.0)
    scaled = inverse_frequencies(32, 500000.0, llama3=Llama3Scaling(8.0, 1.0, 4.0, 64))
    ratio = plain / scaled
    assert (ratio == 1).any() and (ratio == 8).any() and ((ratio > 1) & (ratio < 8)).any()


def test_partial_rotary_equals_gpt_neox():
    config = GPTNeoXConfig(hidden_size=64, num_attention_heads=2, rotary_pct=0.25)
    hf = hf_neox.GPTNeoXRotaryEmbedding(config)
    ours = RotaryEmbedding(inverse_frequencies(8, 10000.0))
    q = torch.randn(2, 7, 2, 32)
    expected = hf_rotate(hf, hf_neox.apply_rotary_pos_emb, q, POSITIONS)
    actual = ours(q, POSITIONS)
    torch.testing.assert_close(actual, expected, atol=1e-6, rtol=0)
    assert torch.equal(actual[..., 8:], q[..., 8:])  # only the first rotary_dim dims rotate


def test_adjacent_pairs_equal_gpt_j():
    q = torch.randn(2, 7, 2, 32)
    sincos = hf_gptj.create_sinusoidal_positions(16, 16)[POSITIONS]
    sin, cos = torch.split(sincos, 8, dim=-1)
    rotated = hf_gptj.apply_rotary_pos_emb(q[..., :16], sin, cos)
    expected = torch.cat([rotated, q[..., 16:]], dim=-1)
    ours = RotaryEmbedding(inverse_frequencies(16, 10000.0), adjacent_pairs=True)
    torch.testing.assert_close(ours(q, POSITIONS), expected, atol=1e-6, rtol=0)


def test_local_and_global_rotary_equal_gemma3():
    config = Gemma3TextConfig(
        hidden_size=64,
        num_attention_heads=2,
        head_dim=32,
        num_hidden_layers=2,
        layer_types=["sliding_attention", "full_attention"],
        rope_parameters={
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
        },
    )
    hf = Gemma3RotaryEmbedding(config)
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=64,
        n_ctx=32,
        n_heads=2,
        d_head=32,
        d_vocab=10,
        normalization_type="RMS",
        positional_embedding_type="rotary",
        rotary_base=1_000_000,
        rotary_base_local=10_000,
        rotary_scaling_factor=8.0,
        use_local_attn=True,
        window_size=4,
        attn_types=["local", "global"],
    )
    q = torch.randn(2, 7, 2, 32)
    for layer, layer_type in enumerate(["sliding_attention", "full_attention"]):
        expected = hf_rotate(hf, hf_llama.apply_rotary_pos_emb, q, POSITIONS, layer_type=layer_type)
        ours = RotaryEmbedding.from_config(cfg, layer)
        torch.testing.assert_close(ours(q, POSITIONS), expected, atol=1e-6, rtol=0)
