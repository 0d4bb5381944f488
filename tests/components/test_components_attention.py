"""Rotary embeddings and attention against Hugging Face's own modules, and the fused
(scaled_dot_product_attention) path against the explicit, hookable one."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from transformers import Gemma3TextConfig, GPTNeoXConfig, LlamaConfig
from transformers.models.gemma3.modeling_gemma3 import Gemma3RotaryEmbedding
from transformers.models.gpt_neox import modeling_gpt_neox as hf_neox
from transformers.models.gptj import modeling_gptj as hf_gptj
from transformers.models.llama import modeling_llama as hf_llama

from interp.components.attention import Attention
from interp.components.rotary import Llama3Scaling, RotaryEmbedding, inverse_frequencies
from interp.config import HookedTransformerConfig
from interp.kv_cache import KeyValueCacheEntry
from interp.model import HookedTransformer
from tests.support.tolerances import tolerance

# Positions of a left-padded batch (HF: cumsum - 1), and far past any n_ctx.
POSITIONS = torch.tensor([[0, 0, 0, 1, 2, 3, 4], [0, 1, 2, 3, 4, 5, 6]])
FAR_POSITIONS = torch.tensor([[5000, 9000, 131071]])


def hf_rotate(rotary_emb, apply, q, positions, **kwargs):
    """Hugging Face's rotation of q [batch, pos, n_heads, d_head] (it runs head-major)."""
    cos, sin = rotary_emb(q, positions, **kwargs)
    rotated, _ = apply(q.transpose(1, 2), q.transpose(1, 2), cos, sin)
    return rotated.transpose(1, 2)


def rotary_tolerance(expected: torch.Tensor) -> dict[str, float]:
    """A rotation: each output a sum of two products (cos and sin) of the input."""
    return tolerance(expected.dtype, reduction=2, magnitude=expected)


def attention_tolerance(cfg: HookedTransformerConfig, expected: torch.Tensor) -> dict[str, float]:
    """One attention sub-layer computed two ways: its longest sum is over d_model or the heads."""
    widest = max(cfg.d_model, cfg.n_heads * cfg.d_head)
    return tolerance(cfg.dtype, reduction=widest, magnitude=expected)


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
    torch.testing.assert_close(ours(q, positions), expected, **rotary_tolerance(expected))


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
    torch.testing.assert_close(actual, expected, **rotary_tolerance(expected))
    assert torch.equal(actual[..., 8:], q[..., 8:])  # only the first rotary_dim dims rotate


def test_adjacent_pairs_equal_gpt_j():
    q = torch.randn(2, 7, 2, 32)
    sincos = hf_gptj.create_sinusoidal_positions(16, 16)[POSITIONS]
    sin, cos = torch.split(sincos, 8, dim=-1)
    rotated = hf_gptj.apply_rotary_pos_emb(q[..., :16], sin, cos)
    expected = torch.cat([rotated, q[..., 16:]], dim=-1)
    ours = RotaryEmbedding(inverse_frequencies(16, 10000.0), adjacent_pairs=True)
    torch.testing.assert_close(ours(q, POSITIONS), expected, **rotary_tolerance(expected))


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
        torch.testing.assert_close(ours(q, POSITIONS), expected, **rotary_tolerance(expected))


# ---------------------------------------------------------------------------- attention
def make_cfg(**overrides) -> HookedTransformerConfig:
    """Two layers of 4 query heads; layer 0 is "local" when a window is given."""
    values = dict(
        n_layers=2,
        d_model=32,
        n_ctx=64,
        n_heads=4,
        d_head=8,
        d_vocab=10,
        normalization_type="RMS",
        positional_embedding_type="rotary",
        eps=1e-6,
    )
    if overrides.get("window_size") is not None:
        values |= dict(use_local_attn=True, attn_types=["local", "global"])
    return HookedTransformerConfig(**(values | overrides))


def make_attention(cfg: HookedTransformerConfig, layer_index: int = 0) -> Attention:
    """Random weights, biases and norm weights: none is left at a value that hides a bug."""
    attn = Attention(cfg, layer_id=layer_index)
    generator = torch.Generator().manual_seed(layer_index)
    with torch.no_grad():
        for param in attn.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3 + 0.05)
    return attn


def count_sdpa_calls(monkeypatch) -> list[int]:
    calls = [0]
    sdpa = F.scaled_dot_product_attention

    def counting(*args, **kwargs):
        calls[0] += 1
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(F, "scaled_dot_product_attention", counting)
    return calls


def explicit(attn: Attention, *args, **kwargs) -> torch.Tensor:
    """The forward through the explicit path: a pattern hook that changes nothing."""
    handle = attn.hook_pattern.add_hook(lambda pattern, hook: None)
    try:
        return attn(*args, **kwargs)
    finally:
        handle.remove()


COMBINATIONS = [
    dict(n_key_value_heads=kv, rotary_dim=rotary_dim, window_size=window, use_qk_norm=qk_norm)
    for kv in (4, 2, 1)
    for rotary_dim in (8, 4)
    for window in (None, 3)
    for qk_norm in (False, True)
]


def combination_id(combination: dict) -> str:
    return "-".join(f"{key}={value}" for key, value in combination.items())


@pytest.mark.parametrize("combination", COMBINATIONS, ids=combination_id)
def test_fused_and_explicit_paths_agree(combination, monkeypatch):
    attn = make_attention(make_cfg(**combination))
    x = torch.randn(2, 7, 32)
    positions = torch.arange(7)[None] + torch.tensor([[0], [5]])  # each row its own positions
    calls = count_sdpa_calls(monkeypatch)
    with torch.no_grad():
        fused = attn(x, x, x, query_positions=positions, key_positions=positions)
        assert calls[0] == 1
        reference = explicit(attn, x, x, x, query_positions=positions, key_positions=positions)
    assert calls[0] == 1
    torch.testing.assert_close(fused, reference, **attention_tolerance(attn.cfg, reference))


@pytest.mark.parametrize("combination", COMBINATIONS[::3], ids=combination_id)
def test_fused_and_explicit_paths_agree_left_padded(combination):
    attn = make_attention(make_cfg(**combination))
    x = torch.randn(2, 7, 32)
    padding = torch.tensor([[False] * 3 + [True] * 4, [True] * 7])
    positions = (padding.long().cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        fused = attn(
            x, x, x, key_padding_mask=padding, query_positions=positions, key_positions=positions
        )
        reference = explicit(
            attn,
            x,
            x,
            x,
            key_padding_mask=padding,
            query_positions=positions,
            key_positions=positions,
        )
    torch.testing.assert_close(fused, reference, **attention_tolerance(attn.cfg, reference))


@pytest.mark.parametrize(
    "combination", [c for c in COMBINATIONS if c["rotary_dim"] == 4], ids=combination_id
)
def test_cached_decoding_equals_the_full_forward(combination):
    """Keys are cached rotated and not expanded; a window of 3 bites on the cached keys."""
    cfg = make_cfg(**combination)
    attn = make_attention(cfg)
    x = torch.randn(2, 9, 32)
    with torch.no_grad():
        whole = attn(x, x, x)
        for path in (attn, lambda *a, **k: explicit(attn, *a, **k)):
            entry, outputs, start = KeyValueCacheEntry(), [], 0
            for size in (5, 1, 2, 1):
                chunk = x[:, start : start + size]
                outputs.append(path(chunk, chunk, chunk, past_kv_cache_entry=entry))
                start += size
            within = attention_tolerance(cfg, whole)
            torch.testing.assert_close(torch.cat(outputs, dim=1), whole, **within)
            assert entry.keys.shape == (2, 9, cfg.n_key_value_heads, 8)


@pytest.mark.parametrize("n_key_value_heads", [4, 2, 1])
def test_soft_capped_scores_take_the_explicit_path(n_key_value_heads, monkeypatch):
    cap = 1.5
    cfg = make_cfg(n_key_value_heads=n_key_value_heads, attn_scores_soft_cap=cap, window_size=3)
    attn = make_attention(cfg)
    x = torch.randn(2, 7, 32)
    calls = count_sdpa_calls(monkeypatch)
    seen = {}
    for name in ("hook_rot_q", "hook_rot_k", "hook_attn_scores"):
        getattr(attn, name).add_hook(lambda x, hook, name=name: seen.update({name: x}))
    with torch.no_grad():
        attn(x, x, x)
    assert calls[0] == 0
    keys = seen["hook_rot_k"].repeat_interleave(4 // n_key_value_heads, dim=2)
    raw = torch.einsum("bqhd,bkhd->bhqk", seen["hook_rot_q"], keys) / cfg.attn_scale
    assert raw.abs().max() > 2 * cap  # the cap bites
    allowed = attn.attention_mask(7, 7, None, x.device)
    expected = (cap * torch.tanh(raw / cap)).masked_fill(~allowed, float("-inf"))
    within = tolerance(torch.float32, reduction=cfg.d_head, magnitude=raw)
    torch.testing.assert_close(seen["hook_attn_scores"], expected, **within)


def test_window_mask_equals_hugging_face():
    from transformers.masking_utils import sliding_window_causal_mask_function

    attn = make_attention(make_cfg(window_size=3))
    query, key = torch.arange(4, 9)[:, None], torch.arange(9)[None, :]  # 4 keys cached
    expected = sliding_window_causal_mask_function(3)(0, 0, query, key)
    assert torch.equal(attn.attention_mask(5, 9, None, key.device)[0, 0], expected)
    assert Attention(make_cfg(window_size=3), layer_id=1).window_size is None  # global


def test_grouped_weights_expand_as_transformer_lens():
    cfg = make_cfg(n_key_value_heads=2)
    attn = make_attention(cfg)
    assert attn._W_K.shape == (2, 32, 8) and attn.W_K.shape == (4, 32, 8)
    assert torch.equal(attn.W_K[1], attn._W_K[0]) and torch.equal(attn.W_V[2], attn._W_V[1])
    assert torch.equal(attn.b_K[3], attn._b_K[1])
    assert {name for name, _ in attn.named_parameters()} == {
        "W_Q",
        "_W_K",
        "_W_V",
        "W_O",
        "b_Q",
        "_b_K",
        "_b_V",
        "b_O",
        "q_norm.w",
        "k_norm.w",
    } - ({"q_norm.w", "k_norm.w"} if not cfg.use_qk_norm else set())
    ungrouped = make_attention(make_cfg())
    assert isinstance(ungrouped.W_K, nn.Parameter) and "W_K" in ungrouped.state_dict()


def test_hook_shapes():
    attn = make_attention(make_cfg(n_key_value_heads=2, use_qk_norm=True))
    shapes = {}
    for name in ("hook_q", "hook_k", "hook_v", "hook_rot_q", "hook_rot_k", "hook_pattern"):
        getattr(attn, name).add_hook(lambda x, hook, name=name: shapes.update({name: x.shape}))
    attn.q_norm.hook_normalized.add_hook(lambda x, hook: shapes.update(q_norm=x.shape))
    with torch.no_grad():
        attn(*[torch.randn(3, 5, 32)] * 3)
    assert shapes == {
        "hook_q": (3, 5, 4, 8),
        "hook_k": (3, 5, 2, 8),
        "hook_v": (3, 5, 2, 8),
        "q_norm": (3, 5, 4, 8),
        "hook_rot_q": (3, 5, 4, 8),
        "hook_rot_k": (3, 5, 2, 8),
        "hook_pattern": (3, 4, 5, 5),
    }
    assert not hasattr(make_attention(make_cfg(positional_embedding_type="standard")), "hook_rot_q")


def test_fewer_queries_than_keys_need_their_positions():
    attn = make_attention(make_cfg())
    x = torch.randn(1, 5, 32)
    with pytest.raises(ValueError, match="2 queries for 5 keys: pass query_positions"):
        attn(x[:, 3:], x, x, allowed_keys=attn.attention_mask(5, 5, None, x.device)[:, :, 3:])
    with torch.no_grad():
        full = attn(x, x, x)
        last = attn(
            x[:, 3:],
            x,
            x,
            allowed_keys=attn.attention_mask(5, 5, None, x.device)[:, :, 3:],
            query_positions=torch.arange(3, 5)[None],
        )
    torch.testing.assert_close(last, full[:, 3:], **attention_tolerance(attn.cfg, full))


# ----------------------------------------------------- against Hugging Face's attention
def load_hf_weights(attn: Attention, hf: nn.Module) -> None:
    """Our per-head layout from HF's q/k/v/o projections ([out, in] linear weights)."""
    h, kv, d, m = attn.cfg.n_heads, attn.n_key_value_heads, attn.cfg.d_head, attn.cfg.d_model

    def per_head(linear, n):  # [n * d, m] -> [n, m, d]; bias [n * d] -> [n, d]
        bias = linear.bias.view(n, d) if linear.bias is not None else torch.zeros(n, d)
        return linear.weight.T.reshape(m, n, d).transpose(0, 1), bias

    prefix = "_" if attn.grouped else ""
    with torch.no_grad():
        for name, linear, n in (("Q", hf.q_proj, h), ("K", hf.k_proj, kv), ("V", hf.v_proj, kv)):
            weight, bias = per_head(linear, n)
            getattr(attn, ("" if name == "Q" else prefix) + f"W_{name}").copy_(weight)
            getattr(attn, ("" if name == "Q" else prefix) + f"b_{name}").copy_(bias)
        attn.W_O.copy_(hf.o_proj.weight.T.reshape(h, d, m))
        attn.b_O.copy_(hf.o_proj.bias if hf.o_proj.bias is not None else torch.zeros(m))


def randomize(module: nn.Module) -> None:
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)


def hf_family(name: str, implementation: str):
    """(HF attention layer 0, its rotary embedding, our config) for one family."""
    from transformers import Gemma2Config, Qwen3Config
    from transformers.models.gemma2 import modeling_gemma2 as hf_gemma2
    from transformers.models.gemma3 import modeling_gemma3 as hf_gemma3
    from transformers.models.qwen3 import modeling_qwen3 as hf_qwen3

    shape = dict(hidden_size=32, num_attention_heads=4, head_dim=8, num_hidden_layers=2)
    ours = dict(n_layers=2, d_model=32, n_ctx=64, n_heads=4, d_head=8, d_vocab=10, eps=1e-6)
    ours |= dict(normalization_type="RMS", positional_embedding_type="rotary")
    if name == "llama":  # GQA 2, q/k/v/o biases, Llama 3 rope scaling
        config = LlamaConfig(
            **shape,
            num_key_value_heads=2,
            attention_bias=True,
            rope_parameters=LLAMA_ROPE["llama3"],
        )
        hf, rotary = hf_llama.LlamaAttention(config, 0), hf_llama.LlamaRotaryEmbedding(config)
        ours |= dict(n_key_value_heads=2, rotary_base=500000, use_NTK_by_parts_rope=True)
        ours |= dict(NTK_original_ctx_len=64)
    elif name == "qwen3":  # GQA 4 (one key/value head), QK norm
        config = Qwen3Config(**shape, num_key_value_heads=1, rms_norm_eps=1e-6)
        hf, rotary = hf_qwen3.Qwen3Attention(config, 0), hf_qwen3.Qwen3RotaryEmbedding(config)
        ours |= dict(
            n_key_value_heads=1, use_qk_norm=True, rotary_base=config.rope_parameters["rope_theta"]
        )
    elif name == "gemma2":  # soft cap that bites, attn_scale from query_pre_attn_scalar, window
        config = Gemma2Config(
            **shape,
            num_key_value_heads=2,
            query_pre_attn_scalar=24,
            attn_logit_softcapping=2.0,
            sliding_window=3,
            layer_types=["sliding_attention", "full_attention"],
        )
        hf, rotary = hf_gemma2.Gemma2Attention(config, 0), hf_gemma2.Gemma2RotaryEmbedding(config)
        ours |= dict(n_key_value_heads=2, attn_scale=24**0.5, attn_scores_soft_cap=2.0)
        ours |= dict(use_local_attn=True, window_size=3, attn_types=["local", "global"])
    else:  # gemma3: QK norm with (1 + w) weights, local rotary base, window
        config = Gemma3TextConfig(
            **shape,
            num_key_value_heads=2,
            query_pre_attn_scalar=8,
            sliding_window=3,
            layer_types=["sliding_attention", "full_attention"],
            rms_norm_eps=1e-6,
        )
        hf, rotary = hf_gemma3.Gemma3Attention(config, 0), hf_gemma3.Gemma3RotaryEmbedding(config)
        ours |= dict(n_key_value_heads=2, use_qk_norm=True, rotary_base=1_000_000)
        ours |= dict(rotary_base_local=10_000, use_local_attn=True, window_size=3)
        ours |= dict(attn_types=["local", "global"])
    config._attn_implementation = implementation
    hf.config._attn_implementation = implementation
    randomize(hf)
    return hf, rotary, HookedTransformerConfig(**ours)


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2", "gemma3"])
def test_attention_equals_hugging_face(family, implementation):
    if (family, implementation) == ("gemma2", "sdpa"):
        pytest.skip("Hugging Face's sdpa refuses soft-capped scores (Gemma 2 runs eager).")
    hf, rotary, cfg = hf_family(family, implementation)
    attn = ours_from_hf(cfg, hf, family)
    x = torch.randn(2, 7, 32)
    positions = torch.arange(7)[None] + torch.tensor([[0], [5]])
    allowed = attn.attention_mask(7, 7, None, x.device)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    kwargs = {"layer_type": "sliding_attention"} if family == "gemma3" else {}
    seen = {}
    with torch.no_grad():
        expected, hf_pattern = hf(x, rotary(x, positions, **kwargs), additive)
        if implementation == "eager":
            attn.hook_pattern.add_hook(lambda pattern, hook: seen.update(pattern=pattern))
            attn.hook_attn_scores.add_hook(lambda scores, hook: seen.update(scores=scores))
        actual = attn(x, x, x, query_positions=positions, key_positions=positions)
    torch.testing.assert_close(actual, expected, **attention_tolerance(cfg, expected))
    if implementation == "eager":
        # A probability moves by at most twice its scores' error: sums over d_model, d_head.
        scores = seen["scores"][seen["scores"].isfinite()]
        within = tolerance(torch.float32, reduction=cfg.d_model, depth=2, magnitude=scores)
        torch.testing.assert_close(seen["pattern"], hf_pattern, **within)


def ours_from_hf(cfg: HookedTransformerConfig, hf: nn.Module, family: str) -> Attention:
    attn = Attention(cfg, layer_id=0)
    load_hf_weights(attn, hf)
    if cfg.use_qk_norm:  # Gemma 3's norms scale by (1 + w): folded into w, as at load
        offset = 1.0 if family == "gemma3" else 0.0
        with torch.no_grad():
            attn.q_norm.w.copy_(hf.q_norm.weight + offset)
            attn.k_norm.w.copy_(hf.k_norm.weight + offset)
    return attn


@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
@pytest.mark.parametrize("family", ["llama", "qwen3", "gemma2", "gemma3"])
def test_bf16_attention_tracks_hugging_face_bf16(family, implementation):
    """Both our paths are within one bf16 rounding step of HF's bf16 output, and no further
    from HF's fp32 output than twice HF's own bf16 error."""
    if (family, implementation) == ("gemma2", "sdpa"):
        pytest.skip("Hugging Face's sdpa refuses soft-capped scores (Gemma 2 runs eager).")
    hf, rotary, cfg = hf_family(family, implementation)
    x = torch.randn(2, 7, 32, generator=torch.Generator().manual_seed(0))
    positions = torch.arange(7)[None] + torch.tensor([[0], [5]])
    allowed = ours_from_hf(cfg, hf, family).attention_mask(7, 7, None, x.device)
    kwargs = {"layer_type": "sliding_attention"} if family == "gemma3" else {}

    def hf_output(dtype):
        additive = torch.zeros(allowed.shape, dtype=dtype)
        additive = additive.masked_fill(~allowed, torch.finfo(dtype).min)
        x_ = x.to(dtype)
        return hf.to(dtype)(x_, rotary(x_, positions, **kwargs), additive)[0].float()

    with torch.no_grad():
        exact, expected = hf_output(torch.float32), hf_output(torch.bfloat16)
        attn = ours_from_hf(dataclasses.replace(cfg, dtype=torch.bfloat16), hf, family)
        xb = x.bfloat16()
        fused = attn(xb, xb, xb, query_positions=positions, key_positions=positions)
        explicit_ = explicit(attn, xb, xb, xb, query_positions=positions, key_positions=positions)
    hf_error = (expected - exact).abs().max()
    one_step = torch.finfo(torch.bfloat16).eps * expected.abs().max()
    for ours in (fused, explicit_):
        assert ours.dtype == torch.bfloat16
        assert (ours.float() - expected).abs().max() <= one_step
        assert (ours.float() - exact).abs().max() <= 2 * hf_error


def test_float64_model_keeps_float64_softmax():
    """A float64 model's explicit attention (a hooked pattern) computes its softmax in float64,
    so it equals the fused path to float64 rounding, not float32's."""
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=50, n_ctx=16, dtype=torch.float64
    )
    model = HookedTransformer(cfg)
    tokens = torch.randint(0, cfg.d_vocab, (2, 10), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        fused = model(tokens)
        explicit, cache = model.run_with_cache(tokens, names_filter=lambda n: "pattern" in n)
    assert cache["pattern", 0].dtype == torch.float64
    torch.testing.assert_close(explicit, fused, **tolerance(torch.float64, reduction=cfg.d_model))
