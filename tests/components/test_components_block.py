"""Norms, MLPs and blocks composed by the config, against transformers' modules with the same
weights (LlamaRMSNorm, LlamaMLP, Gemma2MLP, GPTNeoXMLP, GPTNeoXLayer, Gemma2DecoderLayer),
and models of each family's shape with TransformerLens's hook names."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from transformers import Gemma2Config, GPTNeoXConfig, LlamaConfig
from transformers.models.gemma2.modeling_gemma2 import (
    Gemma2DecoderLayer,
    Gemma2MLP,
    Gemma2RMSNorm,
    Gemma2RotaryEmbedding,
)
from transformers.models.gpt_neox.modeling_gpt_neox import (
    GPTNeoXLayer,
    GPTNeoXMLP,
    GPTNeoXRotaryEmbedding,
)
from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import hook_shapes
from interp.components import (
    MLP,
    LayerNorm,
    LayerNormPre,
    RMSNorm,
    RMSNormPre,
    TransformerBlock,
    applied_weight,
    make_norm,
)
from interp.kv_cache import KeyValueCache
from tests.support.tolerances import model_tolerance, tolerance


@pytest.fixture(autouse=True)
def no_grad():
    with torch.no_grad():
        yield


LLAMA = dict(
    n_layers=2, d_model=64, n_ctx=32, n_heads=4, n_key_value_heads=2, d_mlp=96, d_vocab=50,
    normalization_type="RMS", positional_embedding_type="rotary", gated_mlp=True,
    act_fn="silu", rotary_base=500000.0,
)  # fmt: skip
NEOX = dict(
    n_layers=2, d_model=64, n_ctx=32, n_heads=4, d_vocab=50, act_fn="gelu",
    positional_embedding_type="rotary", rotary_dim=4, parallel_attn_mlp=True,
)  # fmt: skip
GEMMA2 = dict(
    n_layers=2, d_model=64, n_ctx=32, n_heads=4, n_key_value_heads=2, d_head=32, d_mlp=96,
    d_vocab=50, normalization_type="RMS", positional_embedding_type="rotary",
    gated_mlp=True, act_fn="gelu_pytorch_tanh", use_normalization_before_and_after=True,
    attn_scores_soft_cap=5.0, output_logits_soft_cap=3.0, use_local_attn=True, window_size=3,
    attn_types=["local", "global"], attn_scale=12.0, tie_word_embeddings=True, eps=1e-6,
    rmsnorm_uses_offset=True,
)  # fmt: skip


def randn(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def randomise(module: nn.Module, seed: int = 0) -> None:
    generator = torch.Generator().manual_seed(seed)
    for param in module.parameters():
        param.copy_(torch.randn(param.shape, generator=generator) * 0.3)


# ------------------------------------------------------------------------------------ norms
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rms_norm_equals_llama_rms_norm_in_every_dtype(dtype):
    cfg = HookedTransformerConfig(**{**LLAMA, "dtype": dtype, "eps": 1e-6})
    ours, reference = RMSNorm(cfg), LlamaRMSNorm(64, eps=1e-6).to(dtype)
    weight = randn(64, seed=1, dtype=dtype)
    ours.w.copy_(weight)
    reference.weight.copy_(weight)
    x = randn(2, 5, 64, seed=2, dtype=dtype) * 3
    assert torch.equal(ours(x), reference(x))  # fp32 arithmetic for half dtypes, as HF

    def read(scale, hook):  # a caching hook: marked as one that only reads
        return None

    read.reads_only = True
    ours.hook_scale.add_hook(read)
    assert torch.equal(ours(x), reference(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_rms_norm_with_offset_equals_gemma2_rms_norm_in_every_dtype(dtype):
    """rmsnorm_uses_offset: w starts at 0 (as Hugging Face's), 1 + w is taken in float32 and
    the product rounded once, so half-precision outputs are Gemma2RMSNorm's bit for bit."""
    cfg = HookedTransformerConfig(**{**GEMMA2, "dtype": dtype})
    ours, reference = RMSNorm(cfg), Gemma2RMSNorm(64, eps=1e-6).to(dtype)
    assert torch.equal(ours.w, reference.weight)  # zeros
    weight = randn(64, seed=3, dtype=dtype)
    reference.weight.copy_(weight)
    ours.w.copy_(weight)
    x = randn(2, 5, 64, seed=4, dtype=dtype) * 3
    assert torch.equal(ours(x), reference(x))
    assert torch.equal(applied_weight(ours), 1 + weight.float())


def test_rms_norm_with_folded_gemma_weight_equals_gemma2_rms_norm():
    """TransformerLens 2.x's convention (its state dicts): 1 + w folded into w, no offset."""
    cfg = HookedTransformerConfig(**{**GEMMA2, "rmsnorm_uses_offset": False})
    ours, reference = RMSNorm(cfg), Gemma2RMSNorm(64, eps=1e-6)
    weight = randn(64, seed=3)
    reference.weight.copy_(weight)
    ours.w.copy_(1 + weight)
    x = randn(2, 5, 64, seed=4)
    expected = reference(x)
    torch.testing.assert_close(
        ours(x), expected, **tolerance(torch.float32, reduction=64, magnitude=expected)
    )
    assert applied_weight(ours) is ours.w


def test_rms_norm_hooks_behave_like_layer_norm_hooks():
    cfg = HookedTransformerConfig(**LLAMA, dtype=torch.bfloat16)
    norm = RMSNorm(cfg)
    norm.w.copy_(randn(64, seed=5))
    x = randn(2, 5, 64, seed=6).bfloat16()
    seen = {}
    norm.hook_scale.add_hook(lambda scale, hook: seen.__setitem__("scale", scale))
    norm.hook_normalized.add_hook(lambda act, hook: seen.__setitem__("normalized", act))
    out = norm(x)
    assert seen["scale"].shape == (2, 5, 1) and seen["scale"].dtype == torch.float32
    expected_scale = (x.float().pow(2).mean(-1, keepdim=True) + cfg.eps).sqrt()
    torch.testing.assert_close(seen["scale"], expected_scale)
    assert seen["normalized"].dtype == torch.float32
    torch.testing.assert_close(seen["normalized"], x.float() / expected_scale)
    assert out.dtype == torch.bfloat16
    # A hook that rewrites the scale is divided by, as LayerNorm's hook_scale.
    norm.hook_scale.add_hook(lambda scale, hook: scale * 2)
    halved = out.float() / 2
    torch.testing.assert_close(
        norm(x).float(), halved, **tolerance(torch.bfloat16, magnitude=halved)
    )


def test_make_norm_follows_normalization_type():
    kinds = {"LN": LayerNorm, "LNPre": LayerNormPre, "RMS": RMSNorm, "RMSPre": RMSNormPre}
    for kind, expected in kinds.items():
        cfg = HookedTransformerConfig(**{**LLAMA, "normalization_type": kind})
        assert type(make_norm(cfg)) is expected
        weighted = make_norm(cfg, weighted=True)  # post-norms keep their weights
        assert weighted.w.shape == (64,) and type(weighted) in (LayerNorm, RMSNorm)
        assert type(make_norm(cfg, length=16)).__name__ == expected.__name__
    cfg = HookedTransformerConfig(**{**LLAMA, "normalization_type": None})
    assert isinstance(make_norm(cfg), nn.Identity)
    assert make_norm(HookedTransformerConfig(**LLAMA), length=16).w.shape == (16,)


# ------------------------------------------------------------------------------------- MLPs
def copy_gated_mlp(ours: MLP, reference: nn.Module) -> None:
    ours.W_gate.copy_(reference.gate_proj.weight.T)
    ours.W_in.copy_(reference.up_proj.weight.T)
    ours.W_out.copy_(reference.down_proj.weight.T)


@pytest.mark.parametrize(
    ("reference_class", "hf_config", "act_fn"),
    [
        (LlamaMLP, LlamaConfig(hidden_size=64, intermediate_size=96), "silu"),
        (Gemma2MLP, Gemma2Config(hidden_size=64, intermediate_size=96), "gelu_pytorch_tanh"),
    ],
)
def test_gated_mlp_equals_transformers_and_hooks_gate_up_and_product(
    reference_class, hf_config, act_fn
):
    reference = reference_class(hf_config)
    randomise(reference)
    ours = MLP(HookedTransformerConfig(**{**LLAMA, "act_fn": act_fn}))
    copy_gated_mlp(ours, reference)
    x = randn(2, 5, 64, seed=7)
    seen = {}
    for name in ("hook_pre", "hook_pre_linear", "hook_post"):
        getattr(ours, name).add_hook(lambda act, hook, name=name: seen.__setitem__(name, act))
    expected = reference(x)
    torch.testing.assert_close(
        ours(x), expected, **tolerance(torch.float32, reduction=96, magnitude=expected)
    )
    gate, up = reference.gate_proj(x), reference.up_proj(x)
    torch.testing.assert_close(seen["hook_pre"], gate)
    torch.testing.assert_close(seen["hook_pre_linear"], up)
    torch.testing.assert_close(seen["hook_post"], reference.act_fn(gate) * up)
    assert {name for name, _ in ours.named_parameters()} == {
        "W_gate", "W_in", "b_in", "W_out", "b_out"
    }  # fmt: skip


def test_gated_mlp_puts_b_in_after_the_product_as_transformer_lens():
    ours = MLP(HookedTransformerConfig(**LLAMA))
    randomise(ours)
    x = randn(3, 64, seed=8)
    post = torch.nn.functional.silu(x @ ours.W_gate) * (x @ ours.W_in) + ours.b_in
    torch.testing.assert_close(ours(x), post @ ours.W_out + ours.b_out)


def test_plain_mlp_equals_gpt_neox_mlp_with_exact_gelu():
    reference = GPTNeoXMLP(GPTNeoXConfig(hidden_size=64, intermediate_size=256, hidden_act="gelu"))
    randomise(reference)
    ours = MLP(HookedTransformerConfig(**NEOX))
    ours.W_in.copy_(reference.dense_h_to_4h.weight.T)
    ours.b_in.copy_(reference.dense_h_to_4h.bias)
    ours.W_out.copy_(reference.dense_4h_to_h.weight.T)
    ours.b_out.copy_(reference.dense_4h_to_h.bias)
    x = randn(2, 5, 64, seed=9)
    expected = reference(x)  # two sums: over d_model = 64, then d_mlp = 256
    torch.testing.assert_close(
        ours(x), expected, **tolerance(torch.float32, reduction=256, magnitude=expected)
    )
    assert not hasattr(ours, "hook_pre_linear") and not hasattr(ours, "W_gate")


# ----------------------------------------------------------------------------------- blocks
def copy_attention(attn: nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                   o: nn.Linear, biases: tuple | None = None) -> None:  # fmt: skip
    """q/k/v weights [n * d_head, d_model] (Hugging Face's Linear layout) into interp's."""
    h, d = attn.W_Q.shape[0], attn.W_Q.shape[2]
    per_head = lambda w: w.view(-1, d, w.shape[-1]).transpose(1, 2)  # noqa: E731
    grouped = attn.grouped
    attn.W_Q.copy_(per_head(q))
    attn.get_parameter("_W_K" if grouped else "W_K").copy_(per_head(k))
    attn.get_parameter("_W_V" if grouped else "W_V").copy_(per_head(v))
    attn.W_O.copy_(o.weight.T.reshape(h, d, -1))
    if o.bias is not None:
        attn.b_O.copy_(o.bias)
    if biases is not None:
        attn.b_Q.copy_(biases[0].view(h, d))
        attn.get_parameter("_b_K" if grouped else "b_K").copy_(biases[1].view(-1, d))
        attn.get_parameter("_b_V" if grouped else "b_V").copy_(biases[2].view(-1, d))


def causal_mask(n: int, window: int | None = None) -> torch.Tensor:
    """Hugging Face's additive 4-D mask [1, 1, n, n] for eager attention."""
    i, j = torch.arange(n)[:, None], torch.arange(n)[None]
    allowed = (j <= i) if window is None else (j <= i) & (i - j < window)
    return torch.zeros(1, 1, n, n).masked_fill(~allowed, float("-inf"))


@pytest.mark.parametrize("parallel", [True, False])
def test_neox_block_equals_gpt_neox_layer(parallel):
    hf_config = GPTNeoXConfig(
        hidden_size=64, num_attention_heads=4, intermediate_size=256, rotary_pct=0.25,
        use_parallel_residual=parallel, hidden_act="gelu", attn_implementation="eager",
    )  # fmt: skip
    reference = GPTNeoXLayer(hf_config, layer_idx=0).eval()
    randomise(reference)
    block = TransformerBlock(HookedTransformerConfig(**{**NEOX, "parallel_attn_mlp": parallel}))
    for ours, theirs in ((block.ln1, reference.input_layernorm),
                         (block.ln2, reference.post_attention_layernorm)):  # fmt: skip
        ours.w.copy_(theirs.weight)
        ours.b.copy_(theirs.bias)
    # The fused query_key_value is interleaved per head: [q_h, k_h, v_h] for each head h.
    qkv_w = reference.attention.query_key_value.weight.view(4, 3, 16, 64)
    qkv_b = reference.attention.query_key_value.bias.view(4, 3, 16)
    weights = [qkv_w[:, i].reshape(64, 64) for i in range(3)]
    copy_attention(block.attn, *weights, reference.attention.dense,
                   tuple(qkv_b[:, i].reshape(64) for i in range(3)))  # fmt: skip
    mlp = reference.mlp
    block.mlp.W_in.copy_(mlp.dense_h_to_4h.weight.T)
    block.mlp.b_in.copy_(mlp.dense_h_to_4h.bias)
    block.mlp.W_out.copy_(mlp.dense_4h_to_h.weight.T)
    block.mlp.b_out.copy_(mlp.dense_4h_to_h.bias)

    x = randn(2, 7, 64, seed=10)
    position_ids = torch.arange(7)[None]
    cos_sin = GPTNeoXRotaryEmbedding(hf_config)(x, position_ids)
    expected = reference(x, causal_mask(7), position_ids, position_embeddings=cos_sin)
    block_tolerance = tolerance(torch.float32, reduction=256, depth=2, magnitude=expected)
    torch.testing.assert_close(block(x), expected, **block_tolerance)
    assert hasattr(block, "hook_resid_mid") is not parallel


def test_gemma2_block_equals_gemma2_decoder_layer():
    hf_config = Gemma2Config(
        hidden_size=64, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
        intermediate_size=96, query_pre_attn_scalar=144, attn_logit_softcapping=5.0,
        sliding_window=3, layer_types=["sliding_attention", "full_attention"],
        num_hidden_layers=2, attn_implementation="eager",
    )  # fmt: skip
    cfg = HookedTransformerConfig(**GEMMA2)
    x = randn(2, 7, 64, seed=11) * 3
    position_ids = torch.arange(7)[None]
    cos_sin = Gemma2RotaryEmbedding(hf_config)(x, position_ids)
    for layer, window in ((0, 3), (1, None)):  # a local layer, then a global one
        reference = Gemma2DecoderLayer(hf_config, layer_idx=layer).eval()
        randomise(reference, seed=layer)
        block = TransformerBlock(cfg, block_index=layer)
        norms = {
            "ln1": "input_layernorm",
            "ln1_post": "post_attention_layernorm",
            "ln2": "pre_feedforward_layernorm",
            "ln2_post": "post_feedforward_layernorm",
        }
        for ours, theirs in norms.items():
            getattr(block, ours).w.copy_(getattr(reference, theirs).weight)
        attn = reference.self_attn
        copy_attention(block.attn, attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight,
                       attn.o_proj)  # fmt: skip
        copy_gated_mlp(block.mlp, reference.mlp)
        expected = reference(
            x, position_embeddings=cos_sin, attention_mask=causal_mask(7, window),
            position_ids=position_ids,
        )  # fmt: skip
        expected = expected[0] if isinstance(expected, tuple) else expected
        block_tolerance = tolerance(torch.float32, reduction=96, depth=2, magnitude=expected)
        torch.testing.assert_close(block(x), expected, **block_tolerance)


def test_sandwich_norms_come_before_the_out_hooks():
    block = TransformerBlock(HookedTransformerConfig(**GEMMA2), block_index=1)
    randomise(block)
    seen = {}
    for name in ("attn.hook_z", "hook_attn_out", "mlp.hook_post", "hook_mlp_out"):
        block.get_submodule(name).add_hook(lambda a, hook, name=name: seen.__setitem__(name, a))
    block(randn(1, 4, 64, seed=12))
    attn_out = torch.einsum("bphd,hdm->bpm", seen["attn.hook_z"], block.attn.W_O)
    attn_out = attn_out + block.attn.b_O
    torch.testing.assert_close(seen["hook_attn_out"], block.ln1_post(attn_out))
    mlp_out = seen["mlp.hook_post"] @ block.mlp.W_out + block.mlp.b_out
    torch.testing.assert_close(seen["hook_mlp_out"], block.ln2_post(mlp_out))


# ----------------------------------------------------------------------------------- models
def block_hooks(*names: str) -> set[str]:
    return {f"blocks.{layer}.{name}" for layer in range(2) for name in names}


# TransformerLens 2.x/3.x's HookedTransformer hook names for each family's shape (from its
# components: TransformerBlock, Attention/GroupedQueryAttention with hook_rot_q/k for rotary,
# q_norm/k_norm RMSNorms for use_qk_norm, GatedMLP, RMSNorm; no hook_pos_embed for rotary,
# no hook_resid_mid in parallel blocks). TransformerLens 4.3 no longer has HookedTransformer,
# so these are its documented names. The opt-in ones (hook_attn_in, hook_q/k/v_input,
# hook_mlp_in, attn.hook_result) are checked separately below.
COMMON = (
    "hook_resid_pre", "hook_attn_out", "hook_mlp_out", "hook_resid_post", "ln1.hook_scale",
    "ln1.hook_normalized", "ln2.hook_scale", "ln2.hook_normalized", "attn.hook_q",
    "attn.hook_k", "attn.hook_v", "attn.hook_rot_q", "attn.hook_rot_k", "attn.hook_z",
    "attn.hook_attn_scores", "attn.hook_pattern", "mlp.hook_pre", "mlp.hook_post",
)  # fmt: skip
FINAL = {"hook_embed", "ln_final.hook_scale", "ln_final.hook_normalized"}
SEQUENTIAL_GATED = ("hook_resid_mid", "mlp.hook_pre_linear")
POST_NORMS = (
    "ln1_post.hook_scale", "ln1_post.hook_normalized", "ln2_post.hook_scale",
    "ln2_post.hook_normalized",
)  # fmt: skip
QK_NORMS = (
    "attn.q_norm.hook_scale", "attn.q_norm.hook_normalized", "attn.k_norm.hook_scale",
    "attn.k_norm.hook_normalized",
)  # fmt: skip
TL_HOOK_NAMES = {
    "llama": FINAL | block_hooks(*COMMON, *SEQUENTIAL_GATED),
    "neox": FINAL | block_hooks(*COMMON),
    "gemma2": FINAL | block_hooks(*COMMON, *SEQUENTIAL_GATED, *POST_NORMS),
    "gemma3": FINAL | block_hooks(*COMMON, *SEQUENTIAL_GATED, *POST_NORMS, *QK_NORMS),
}
GEMMA3 = {
    **GEMMA2, "attn_scores_soft_cap": -1.0, "output_logits_soft_cap": -1.0, "use_qk_norm": True,
    "rotary_base_local": 10000, "rotary_base": 1000000, "rotary_scaling_factor": 8.0,
}  # fmt: skip
FAMILIES = {"llama": LLAMA, "neox": NEOX, "gemma2": GEMMA2, "gemma3": GEMMA3}


@pytest.mark.parametrize("family", FAMILIES)
def test_run_with_cache_has_every_transformer_lens_hook_name(family):
    model = HookedTransformer(FAMILIES[family])
    tokens = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    logits, cache = model.run_with_cache(tokens)
    assert set(cache.keys()) == set(model.hook_dict) == TL_HOOK_NAMES[family]
    # The cache's explicit attention path equals the fused one.
    torch.testing.assert_close(logits, model(tokens), **model_tolerance(model.cfg, logits))
    assert {name for name, _ in hook_shapes(model)} == TL_HOOK_NAMES[family]  # `interp hooks`
    cfg = model.cfg
    n_kv = cfg.n_key_value_heads or cfg.n_heads
    assert cache["blocks.0.attn.hook_q"].shape == (2, 6, cfg.n_heads, cfg.d_head)
    assert cache["blocks.0.attn.hook_k"].shape == (2, 6, n_kv, cfg.d_head)
    assert cache["blocks.0.attn.hook_rot_k"].shape == (2, 6, n_kv, cfg.d_head)
    assert cache["blocks.0.attn.hook_v"].shape == (2, 6, n_kv, cfg.d_head)
    assert cache["blocks.0.ln1.hook_scale"].shape == (2, 6, 1)
    assert cache["blocks.1.mlp.hook_post"].shape == (2, 6, cfg.d_mlp)
    assert not hasattr(model, "pos_embed")


@pytest.mark.parametrize("family", FAMILIES)
def test_opt_in_hooks_complete_transformer_lens_set(family):
    flags = dict(use_attn_result=True, use_split_qkv_input=True, use_hook_mlp_in=True)
    model = HookedTransformer({**FAMILIES[family], **flags})
    tokens = torch.randint(0, 50, (1, 5), generator=torch.Generator().manual_seed(1))
    _, cache = model.run_with_cache(tokens)
    opt_in = block_hooks(
        "hook_q_input", "hook_k_input", "hook_v_input", "hook_mlp_in", "attn.hook_result"
    )
    assert set(cache.keys()) == TL_HOOK_NAMES[family] | opt_in
    n_kv = model.cfg.n_key_value_heads or model.cfg.n_heads
    assert cache["blocks.0.hook_k_input"].shape == (1, 5, n_kv, 64)
    plain = HookedTransformer(FAMILIES[family])
    plain.load_state_dict(model.state_dict())
    expected = plain(tokens)
    torch.testing.assert_close(model(tokens), expected, **model_tolerance(model.cfg, expected))


def test_use_attn_in_with_grouped_query_attention_is_a_clear_error():
    message = (
        r"use_attn_in=True feeds one input per query head .* n_key_value_heads=2 < n_heads=4; "
        r"use use_split_qkv_input=True"
    )
    with pytest.raises(ValueError, match=message):
        HookedTransformer({**LLAMA, "use_attn_in": True})


def test_output_logits_soft_cap_and_tied_embeddings():
    model = HookedTransformer({**GEMMA2, "init_range": 1.0})
    assert torch.equal(model.W_U, model.W_E.T)  # tied: a copy at initialisation
    assert model.W_U.data_ptr() != model.W_E.data_ptr()
    tokens = torch.randint(0, 50, (1, 6), generator=torch.Generator().manual_seed(2))
    final = model(tokens, stop_at_layer=2)
    raw = model.ln_final(final) @ model.W_U + model.b_U
    logits = model(tokens)
    torch.testing.assert_close(logits, 3.0 * torch.tanh(raw / 3.0))
    assert logits.abs().max() <= 3.0 < raw.abs().max()  # the cap bites


def test_rotary_positions_follow_left_padding_and_every_entry_point():
    model = HookedTransformer(LLAMA)
    tokens = torch.randint(1, 50, (1, 5), generator=torch.Generator().manual_seed(3))
    alone = model(tokens)
    padded = torch.cat([torch.zeros(1, 2, dtype=torch.long), tokens], dim=1)
    mask = torch.tensor([[0, 0, 1, 1, 1, 1, 1]])
    within = model_tolerance(model.cfg, alone)
    torch.testing.assert_close(model(padded, attention_mask=mask)[:, 2:], alone, **within)
    # start_at_layer / stop_at_layer resume with the same positions.
    resid = model(padded, attention_mask=mask, stop_at_layer=1)
    resumed = model(resid, start_at_layer=1, attention_mask=mask)
    torch.testing.assert_close(resumed[:, 2:], alone, **within)
    with pytest.raises(ValueError, match="rotary position embeddings: no W_pos"):
        model.W_pos  # noqa: B018
    assert model.W_gate.shape == (2, 64, 96) and model.W_K.shape == (2, 4, 64, 16)


def test_bf16_model_keeps_norms_in_float32():
    model = HookedTransformer({**GEMMA2, "dtype": torch.bfloat16})
    tokens = torch.randint(0, 50, (1, 4), generator=torch.Generator().manual_seed(4))
    logits, cache = model.run_with_cache(tokens)
    assert logits.dtype == torch.bfloat16
    assert cache["blocks.0.ln1.hook_scale"].dtype == torch.float32
    assert cache["blocks.0.ln1_post.hook_normalized"].dtype == torch.float32
    assert cache["blocks.0.hook_resid_post"].dtype == torch.bfloat16


@pytest.mark.parametrize("padded", [False, True])
def test_kv_cache_and_start_at_layer_continue_rotary_positions(padded):
    model = HookedTransformer(LLAMA)
    tokens = torch.randint(1, 50, (2, 7), generator=torch.Generator().manual_seed(5))
    mask = torch.ones_like(tokens)
    if padded:
        tokens[1, :2] = 0
        mask[1, :2] = 0
    full = model(tokens, attention_mask=mask)
    cache = KeyValueCache.empty(2)
    model(tokens[:, :4], attention_mask=mask[:, :4], past_kv_cache=cache)
    assert cache.entries[0].keys.shape == (2, 4, 2, 16)  # n_key_value_heads, not expanded
    residual = model.embed(tokens[:, 4:])
    rest = model(residual, start_at_layer=0, attention_mask=mask[:, 4:], past_kv_cache=cache)
    torch.testing.assert_close(rest, full[:, 4:], **model_tolerance(model.cfg, full))
