"""Every supported architecture against Hugging Face itself: random-weight tiny models built
here (partial rotary, GQA ratios 1/2/4, rope scaling, tied and untied embeddings, sliding
windows shorter than the sequence, soft caps that bite, QK norms), saved with
save_pretrained, loaded with ``from_pretrained_no_processing``: fp32 logits within 1e-4 of
Hugging Face's eager and sdpa attention (Gemma 2 has eager only, as in transformers), on
our fused path and on the hooked one, equal loss, and patterns equal to HF's
``output_attentions``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
import transformers

from interp import HookedTransformer
from interp.components import applied_weight
from tests.support.tolerances import model_error_bound, model_tolerance, within_contract

VOCAB, N_CTX = 128, 12
SMALL = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
)
LLAMA3_ROPE = dict(
    rope_type="llama3",
    rope_theta=500000.0,
    factor=8.0,
    low_freq_factor=1.0,
    high_freq_factor=4.0,
    original_max_position_embeddings=32,
)


@dataclasses.dataclass
class Case:
    make: Callable[[], transformers.PreTrainedModel]
    weight_std: float = 0.1  # weights ~ N(0, std), so every layer matters
    sdpa: bool = True  # Hugging Face has an sdpa implementation for this architecture
    shard: bool = False  # saved in several safetensors shards
    soft_caps: tuple[float, float] | None = None  # (scores, logits) caps that bite; -1: none


def neox(**kwargs) -> transformers.GPTNeoXForCausalLM:
    fields = {k: v for k, v in SMALL.items() if k != "num_key_value_heads"}
    return transformers.GPTNeoXForCausalLM(transformers.GPTNeoXConfig(**fields, **kwargs))


def llama(**kwargs) -> transformers.LlamaForCausalLM:
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(**SMALL, **kwargs))


def mistral(**kwargs) -> transformers.MistralForCausalLM:
    return transformers.MistralForCausalLM(transformers.MistralConfig(**SMALL, **kwargs))


def qwen2(**kwargs) -> transformers.Qwen2ForCausalLM:
    return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SMALL, **kwargs))


def qwen3(**kwargs) -> transformers.Qwen3ForCausalLM:
    return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(**SMALL, **kwargs))


def gemma2(**kwargs) -> transformers.Gemma2ForCausalLM:
    return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(**SMALL, **kwargs))


def gemma3_text_config(**kwargs) -> transformers.Gemma3TextConfig:
    return transformers.Gemma3TextConfig(
        **SMALL, layer_types=["sliding_attention", "full_attention"], **kwargs
    )


def gemma3(**kwargs) -> transformers.Gemma3ForCausalLM:
    return transformers.Gemma3ForCausalLM(gemma3_text_config(**kwargs))


def gemma3_multimodal(**kwargs) -> transformers.Gemma3ForConditionalGeneration:
    vision = transformers.SiglipVisionConfig(
        hidden_size=32,
        intermediate_size=37,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=28,
        patch_size=14,
    )
    config = transformers.Gemma3Config(
        text_config=gemma3_text_config(**kwargs), vision_config=vision, mm_tokens_per_image=4
    )
    return transformers.Gemma3ForConditionalGeneration(config)


CASES = {
    "neox-parallel-partial-rotary": Case(lambda: neox(rotary_pct=0.25)),
    "neox-sequential-half-rotary-no-bias": Case(
        lambda: neox(rotary_pct=0.5, use_parallel_residual=False, attention_bias=False)
    ),
    "neox-full-rotary-tied-sharded": Case(
        lambda: neox(rotary_pct=1.0, rotary_emb_base=500.0, tie_word_embeddings=True),
        shard=True,
    ),
    "llama-mha-tied": Case(lambda: llama(num_key_value_heads=4, tie_word_embeddings=True)),
    "llama-gqa2-llama3-rope": Case(
        lambda: llama(num_key_value_heads=2, rope_parameters=dict(LLAMA3_ROPE))
    ),
    "llama-gqa4-linear-rope-biases-sharded": Case(
        lambda: llama(
            num_key_value_heads=1,
            attention_bias=True,
            rope_parameters=dict(rope_type="linear", rope_theta=10000.0, factor=4.0),
        ),
        shard=True,
    ),
    "mistral-window-5": Case(lambda: mistral(num_key_value_heads=2, sliding_window=5)),
    "mistral-no-window-tied": Case(
        lambda: mistral(num_key_value_heads=4, sliding_window=None, tie_word_embeddings=True)
    ),
    "qwen2-gqa2-biases-tied": Case(lambda: qwen2(num_key_value_heads=2, tie_word_embeddings=True)),
    "qwen2-window-on-layer-1": Case(
        lambda: qwen2(
            num_key_value_heads=4, use_sliding_window=True, sliding_window=4, max_window_layers=1
        )
    ),
    "qwen3-qk-norm-head-dim-32": Case(lambda: qwen3(num_key_value_heads=2, head_dim=32)),
    "qwen3-gqa4-tied": Case(
        lambda: qwen3(num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)
    ),
    "gemma2-soft-caps-bite-window-4": Case(
        lambda: gemma2(
            num_key_value_heads=2,
            head_dim=32,
            query_pre_attn_scalar=24,
            sliding_window=4,
            attn_logit_softcapping=3.0,
            final_logit_softcapping=4.0,
        ),
        weight_std=0.5,
        sdpa=False,
        soft_caps=(3.0, 4.0),
    ),
    "gemma2-untied-mha": Case(
        lambda: gemma2(num_key_value_heads=4, head_dim=16, tie_word_embeddings=False),
        sdpa=False,
    ),
    "gemma3-dual-rope-linear-window-4": Case(
        lambda: gemma3(
            num_key_value_heads=2,
            head_dim=32,
            sliding_window=4,
            rope_parameters=dict(
                full_attention=dict(rope_type="linear", rope_theta=1_000_000.0, factor=8.0),
                sliding_attention=dict(rope_type="default", rope_theta=10000.0),
            ),
        )
    ),
    # Hugging Face's Gemma 3 caps the logits but ignores attn_logit_softcapping: so do we.
    "gemma3-logit-cap-gqa4": Case(
        lambda: gemma3(
            num_key_value_heads=1,
            head_dim=16,
            sliding_window=3,
            attn_logit_softcapping=0.5,
            final_logit_softcapping=4.0,
        ),
        weight_std=0.5,
        soft_caps=(-1.0, 4.0),
    ),
    "gemma3-multimodal-text-part": Case(
        lambda: gemma3_multimodal(num_key_value_heads=2, head_dim=16, sliding_window=4)
    ),
}


def randomize(hf_model: transformers.PreTrainedModel, std: float) -> None:
    """Weights ~ N(0, std) and norm weights and biases near their identity (HF's init leaves
    them exactly at it, which would hide a norm or bias loaded in the wrong place)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in hf_model.parameters():
            noise = torch.randn(param.shape, generator=generator)
            param.copy_(noise * std if param.ndim >= 2 else param + noise * 0.1)


def saved(folder: Path | str, case: str, **save_kwargs) -> transformers.PreTrainedModel:
    """Case ``case``'s Hugging Face model (seed 0, then ``randomize``d), in eval mode, saved to
    ``folder`` with ``save_pretrained(folder, **save_kwargs)``."""
    torch.manual_seed(0)
    hf_model = CASES[case].make().eval()
    randomize(hf_model, CASES[case].weight_std)
    hf_model.save_pretrained(folder, **save_kwargs)
    return hf_model


def tokens() -> torch.Tensor:
    return torch.randint(0, VOCAB, (2, N_CTX), generator=torch.Generator().manual_seed(1))


def hugging_face(hf_class: type, folder: Path, implementation: str):
    """Hugging Face's logits, loss and (eager) patterns, from the saved folder."""
    hf_model = hf_class.from_pretrained(folder, attn_implementation=implementation).eval()
    with torch.no_grad():
        return hf_model(tokens(), labels=tokens(), output_attentions=implementation == "eager")


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    case = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    hf_model = saved(folder, request.param, **({"max_shard_size": "40KB"} if case.shard else {}))
    if case.shard:
        assert len(list(folder.glob("model-*.safetensors"))) > 1
    model = HookedTransformer.from_pretrained_no_processing(folder).eval()
    return case, type(hf_model), folder, model


def test_logits_loss_and_patterns_equal_hugging_face(loaded):
    case, hf_class, folder, model = loaded
    assert model.cfg.dtype == torch.float32
    eager = hugging_face(hf_class, folder, "eager")
    with torch.no_grad():
        logits, loss = model(tokens(), return_type="both")  # fused attention (no hooks)
        hooked_logits, cache = model.run_with_cache(tokens())  # explicit attention
    largest = eager.logits.abs().max()
    bound = within_contract(1e-4, model_error_bound(model.cfg, largest))  # the README's 1e-4
    assert (logits - eager.logits).abs().max() <= bound
    assert (hooked_logits - eager.logits).abs().max() <= bound
    # The loss moves by at most twice the logits' error (logsumexp, less the target's logit).
    torch.testing.assert_close(loss, eager.loss, **model_tolerance(model.cfg, 2 * largest))
    for layer, hf_pattern in enumerate(eager.attentions):
        # A probability moves by at most twice its scores' error.
        scores = cache["attn_scores", layer][cache["attn_scores", layer].isfinite()]
        pattern_bound = model_error_bound(model.cfg, 2 * scores.abs().max())
        assert (cache["pattern", layer] - hf_pattern).abs().max() <= pattern_bound, layer
    if case.sdpa:
        sdpa = hugging_face(hf_class, folder, "sdpa")
        assert (logits - sdpa.logits).abs().max() <= bound
        assert (hooked_logits - sdpa.logits).abs().max() <= bound


@pytest.mark.parametrize(
    "loaded", [name for name, case in CASES.items() if case.soft_caps], indirect=True
)
def test_soft_caps_bite(loaded):
    """The soft-capped cases are only meaningful if the caps change the numbers: the scores
    our hook sees (after capping) come close to the cap, which tanh reaches only for inputs
    well past it, and the uncapped logits exceed the logit cap."""
    case, _, _, model = loaded
    score_cap, logit_cap = case.soft_caps
    assert model.cfg.attn_scores_soft_cap == score_cap
    assert model.cfg.output_logits_soft_cap == logit_cap
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens())
    residual = cache["ln_final.hook_normalized"] * applied_weight(model.ln_final)
    assert (residual @ model.W_U + model.b_U).abs().max() > 1.5 * logit_cap
    if score_cap > 0:
        scores = cache["attn_scores", 0]
        assert scores[scores.isfinite()].abs().max() > 0.9 * score_cap
