"""Random HookedTransformers shaped like each model family, no checkpoint needed: Llama-shaped
(RMS norms, rotary, grouped-query attention, gated SiLU MLP), Pythia-shaped (partial rotary,
parallel attention and MLP, LayerNorm), Gemma 2-shaped (sandwich norms, soft-capped scores
and logits, a local layer whose window is shorter than the prompt, grouped-query attention),
Gemma 3-shaped (the same without soft caps, so the fused attention kernel runs with the window
mask, plus QK norm, a local rotary base and linear rope scaling on the global layer) and
Qwen 3-shaped (QK norm, one key/value head).

    model, clean, corrupted, answers, clean_cache = setup("gemma2")
"""

from __future__ import annotations

import functools

import torch

import interp

D_VOCAB, N_POS = 61, 8
COMMON = dict(
    n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=48, d_vocab=D_VOCAB, n_ctx=32,
    init_range=0.3, positional_embedding_type="rotary",
)  # fmt: skip
FAMILIES = {
    "llama": dict(
        normalization_type="RMS", n_key_value_heads=2, gated_mlp=True, act_fn="silu", seed=1
    ),
    "pythia": dict(
        normalization_type="LN", rotary_dim=2, parallel_attn_mlp=True, act_fn="gelu", seed=2
    ),
    "gemma2": dict(
        normalization_type="RMS",
        n_key_value_heads=2,
        gated_mlp=True,
        act_fn="gelu_pytorch_tanh",
        use_normalization_before_and_after=True,
        rmsnorm_uses_offset=True,
        attn_scores_soft_cap=1.0,
        output_logits_soft_cap=2.0,
        use_local_attn=True,
        window_size=3,
        attn_types=["local", "global"],
        seed=3,
    ),  # fmt: skip
    "gemma3": dict(
        normalization_type="RMS",
        n_key_value_heads=2,
        use_qk_norm=True,
        gated_mlp=True,
        act_fn="gelu_pytorch_tanh",
        use_normalization_before_and_after=True,
        rmsnorm_uses_offset=True,
        use_local_attn=True,
        window_size=3,
        attn_types=["local", "global"],
        rotary_base=1_000_000,
        rotary_base_local=10_000,
        rotary_scaling_factor=8.0,
        seed=5,
    ),  # fmt: skip
    "qwen3": dict(
        normalization_type="RMS",
        n_key_value_heads=1,
        use_qk_norm=True,
        gated_mlp=True,
        act_fn="silu",
        rotary_base=1_000_000,
        seed=4,
    ),  # fmt: skip
}


def make_model(family: str, **overrides) -> interp.HookedTransformer:
    """The family's random model (``COMMON`` sizes, changed by ``overrides``), with random norm
    weights and biases (not the init's ones and zeros), in eval mode."""
    cfg = interp.HookedTransformerConfig(**{**COMMON, **FAMILIES[family], **overrides})
    model = interp.HookedTransformer(cfg).eval()
    generator = torch.Generator().manual_seed(cfg.seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            last = name.rsplit(".", 1)[-1]
            if last in ("w", "b") or last.startswith(("b_", "_b_")):
                param.add_(torch.randn(param.shape, generator=generator) * 0.2)
    return model


@functools.cache
def setup(family: str):
    """The model, 2 clean and corrupted prompts of 8 tokens (differing at 2 and 5), answers
    and the clean cache."""
    model = make_model(family)
    generator = torch.Generator().manual_seed(0)
    clean = torch.randint(0, D_VOCAB, (2, N_POS), generator=generator)
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 7) % D_VOCAB
    corrupted[:, 5] = (clean[:, 5] + 3) % D_VOCAB
    answers = torch.randint(0, D_VOCAB, (2, 2), generator=generator)
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
    return model, clean, corrupted, answers, clean_cache
