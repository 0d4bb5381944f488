"""The second group of dense families against Hugging Face itself: Gemma 1, OPT, GPT-Neo,
GPT-J and Phi, as random-weight tiny models built here with each hard part biting (OPT's
position offset, GPT-Neo's unscaled scores and a local window shorter than the prompt,
GPT-J's adjacent-pair partial rotary and shared norm, Phi's partial rotate-half rotary and
dense biases, Gemma's MQA and legacy ``gelu``), saved with save_pretrained and loaded with
``from_pretrained_no_processing``: fp32 logits within 1e-4 of Hugging Face's eager and sdpa
attention (where it has sdpa), patterns equal to ``output_attentions``, bf16 logits as close
to Hugging Face's bf16 as those are to fp32, KV-cache and left-padded greedy generation
equal to ``generate``, ``from_pretrained``'s processing keeping the logits, TransformerLens's
hook names and ``interp hooks``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import main
from tests.cli.test_cli_families import word_tokenizer
from tests.loading.test_families_parity import SMALL, VOCAB, Case, hugging_face, randomize, tokens
from tests.model.test_generation_families import N_NEW, PROMPT_LENGTHS, ours, padded_prompts, theirs
from tests.support.hub_cache import hub_cache  # noqa: F401 (a fixture)
from tests.support.tolerances import logits_bound, model_error_bound, within_contract

SMALL_GPT = dict(vocab_size=VOCAB, max_position_embeddings=64)


def gemma(**kwargs) -> transformers.GemmaForCausalLM:
    return transformers.GemmaForCausalLM(transformers.GemmaConfig(**SMALL, **kwargs))


def opt(**kwargs) -> transformers.OPTForCausalLM:
    fields = dict(hidden_size=64, ffn_dim=96, num_hidden_layers=2, num_attention_heads=4)
    return transformers.OPTForCausalLM(transformers.OPTConfig(**SMALL_GPT, **fields, **kwargs))


def gpt_neo(**kwargs) -> transformers.GPTNeoForCausalLM:
    fields = dict(hidden_size=64, num_layers=2, num_heads=4, intermediate_size=96)
    config = transformers.GPTNeoConfig(**SMALL_GPT, **fields, **kwargs)
    return transformers.GPTNeoForCausalLM(config)


def gptj(**kwargs) -> transformers.GPTJForCausalLM:
    fields = dict(vocab_size=VOCAB, n_positions=64, n_embd=64, n_layer=2, n_head=4, n_inner=96)
    return transformers.GPTJForCausalLM(transformers.GPTJConfig(**fields, **kwargs))


def phi(**kwargs) -> transformers.PhiForCausalLM:
    return transformers.PhiForCausalLM(transformers.PhiConfig(**SMALL, **kwargs))


def phi3(**kwargs) -> transformers.Phi3ForCausalLM:
    return transformers.Phi3ForCausalLM(transformers.Phi3Config(**SMALL, pad_token_id=0, **kwargs))


def olmo2(**kwargs) -> transformers.Olmo2ForCausalLM:
    return transformers.Olmo2ForCausalLM(
        transformers.Olmo2Config(**SMALL, pad_token_id=0, **kwargs)
    )


def bloom(**kwargs) -> transformers.BloomForCausalLM:
    fields = dict(vocab_size=VOCAB, hidden_size=64, n_layer=2) | kwargs
    return transformers.BloomForCausalLM(transformers.BloomConfig(**fields))


NEO_LOCAL_SECOND = [[["global", "local"], 1]]
CASES = {
    "gemma-mqa-tied-legacy-gelu": Case(
        lambda: gemma(num_key_value_heads=1, head_dim=32, hidden_act="gelu")
    ),
    "gemma-mha-untied": Case(
        lambda: gemma(num_key_value_heads=4, head_dim=16, tie_word_embeddings=False)
    ),
    "opt-biases-tied": Case(lambda: opt()),
    "opt-no-biases-untied-gelu": Case(
        lambda: opt(enable_bias=False, tie_word_embeddings=False, activation_function="gelu")
    ),
    "gpt-neo-window-3": Case(
        lambda: gpt_neo(attention_types=NEO_LOCAL_SECOND, window_size=3), sdpa=False
    ),
    "gpt-neo-local-first-untied": Case(
        lambda: gpt_neo(
            attention_types=[[["local", "global"], 1]], window_size=5, tie_word_embeddings=False
        ),
        sdpa=False,
    ),
    "gptj-rotary-quarter": Case(lambda: gptj(rotary_dim=4)),
    "gptj-full-rotary-tied": Case(lambda: gptj(rotary_dim=16, tie_word_embeddings=True)),
    "phi-partial-0.4": Case(lambda: phi(partial_rotary_factor=0.4)),
    "phi-gqa2-linear-rope": Case(
        lambda: phi(
            num_key_value_heads=2,
            rope_parameters=dict(
                rope_type="linear", rope_theta=500.0, factor=4.0, partial_rotary_factor=0.5
            ),
        )
    ),
    "phi3-gqa2-window-5": Case(lambda: phi3(num_key_value_heads=2, sliding_window=5)),
    "phi3-partial-0.75-tied": Case(
        lambda: phi3(
            num_key_value_heads=4,
            tie_word_embeddings=True,
            rope_parameters=dict(rope_type="default", rope_theta=500.0, partial_rotary_factor=0.75),
        )
    ),
    # A prompt of 12 is past the original context of 8: the long factors; 8 or fewer: short.
    "phi3-longrope-past-original-8": Case(
        lambda: phi3(
            num_key_value_heads=2,
            original_max_position_embeddings=8,
            rope_parameters=dict(
                rope_type="longrope",
                rope_theta=10000.0,
                short_factor=[1.0 + i / 10 for i in range(8)],
                long_factor=[2.0 + i for i in range(8)],
            ),
        )
    ),
    "olmo2-gqa2-post-norms": Case(lambda: olmo2(num_key_value_heads=2)),
    "olmo2-mha-tied-llama3-rope": Case(
        lambda: olmo2(
            num_key_value_heads=4,
            tie_word_embeddings=True,
            rope_parameters=dict(
                rope_type="llama3",
                rope_theta=500000.0,
                factor=8.0,
                low_freq_factor=1.0,
                high_freq_factor=4.0,
                original_max_position_embeddings=32,
            ),
        )
    ),
    "bloom-alibi-6-heads": Case(lambda: bloom(n_head=6, hidden_size=48), sdpa=False),  # not 2**k
    "bloom-alibi-4-heads-untied": Case(
        lambda: bloom(n_head=4, tie_word_embeddings=False), sdpa=False
    ),
}
# LongRoPE's frequencies change, for every position, once the longest row passes the original
# context (generation then recomputes its cache, as Hugging Face's): a prompt alone switches
# later than in a batch with a longer row, so the two legitimately differ, in Hugging Face too.
SWITCHES_FREQUENCIES = {"phi3-longrope-past-original-8"}


def saved(folder: Path | str, case: str) -> transformers.PreTrainedModel:
    """Case ``case``'s Hugging Face model (seed 0, then ``randomize``d), in eval mode, saved."""
    torch.manual_seed(0)
    hf_model = CASES[case].make().eval()
    randomize(hf_model, CASES[case].weight_std)
    hf_model.save_pretrained(folder)
    return hf_model


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    hf_model = saved(folder, request.param)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    return CASES[request.param], type(hf_model), folder, model


def test_logits_and_patterns_equal_hugging_face(loaded):
    case, hf_class, folder, model = loaded
    eager = hugging_face(hf_class, folder, "eager")
    with torch.no_grad():
        logits = model(tokens())  # fused attention (no hooks)
        hooked_logits, cache = model.run_with_cache(tokens())  # explicit attention
    bound = logits_bound(model.cfg, eager.logits)
    assert (logits - eager.logits).abs().max() <= bound
    assert (hooked_logits - eager.logits).abs().max() <= bound
    for layer, hf_pattern in enumerate(eager.attentions):
        # A probability moves by at most twice its scores' error.
        scores = cache["attn_scores", layer][cache["attn_scores", layer].isfinite()]
        pattern_bound = model_error_bound(model.cfg, 2 * scores.abs().max())
        assert (cache["pattern", layer] - hf_pattern).abs().max() <= pattern_bound, layer
    if case.sdpa:
        sdpa = hugging_face(hf_class, folder, "sdpa")
        assert (logits - sdpa.logits).abs().max() <= bound
        assert (hooked_logits - sdpa.logits).abs().max() <= bound


def test_hard_parts_bite(loaded):
    """Each case exercises what it claims: a window shorter than the prompt masks keys, the
    shared norm is loaded twice, partial rotary leaves dimensions unrotated."""
    _, hf_class, _, model = loaded
    cfg = model.cfg
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens())
    if cfg.use_local_attn:
        local = cfg.attn_types.index("local")
        assert cfg.window_size < tokens().shape[1]
        assert (cache["pattern", local][..., -1, : -cfg.window_size] == 0).all()
        if "global" in cfg.attn_types:
            full = cfg.attn_types.index("global")
            assert (cache["pattern", full][..., -1, : -cfg.window_size] > 0).all()
    if hf_class is transformers.GPTNeoForCausalLM:
        assert not cfg.use_attn_scale and cfg.attn_scale == 1.0
    if cfg.parallel_attn_mlp:
        assert torch.equal(model.blocks[0].ln1.w, model.blocks[0].ln2.w)
    if cfg.positional_embedding_type == "rotary" and cfg.rotary_dim < cfg.d_head:
        q, rot_q = cache["blocks.0.attn.hook_q"], cache["blocks.0.attn.hook_rot_q"]
        assert torch.equal(q[..., cfg.rotary_dim :], rot_q[..., cfg.rotary_dim :])
        assert not torch.equal(q[:, 1:, :, : cfg.rotary_dim], rot_q[:, 1:, :, : cfg.rotary_dim])
    if cfg.longrope_short_factor is not None:  # past the original context: long factors
        assert tokens().shape[1] > cfg.longrope_original_ctx_len
        original = cfg.longrope_original_ctx_len
        with torch.no_grad():
            prefix = model(tokens()[:, :original])
        assert not torch.allclose(prefix, model(tokens())[:, :original], atol=1e-3)
        hf_prefix = hf_class.from_pretrained(loaded[2])(tokens()[:, :original]).logits
        assert (prefix - hf_prefix).abs().max() <= logits_bound(cfg, hf_prefix)
    if cfg.use_post_norms_only:  # OLMo 2: norms after the sublayers only, QK norms across heads
        assert "blocks.0.ln1.hook_scale" not in model.hook_dict
        assert "blocks.0.ln1_post.hook_scale" in model.hook_dict
        n_kv = cfg.n_key_value_heads or cfg.n_heads
        assert model.blocks[0].attn.q_norm.w.shape == (cfg.n_heads * cfg.d_head,)
        assert model.blocks[0].attn.k_norm.w.shape == (n_kv * cfg.d_head,)
        with pytest.warns(UserWarning, match="fold_ln cannot fold OLMo 2's norms"):
            HookedTransformer.from_pretrained(loaded[2], tokenizer=None)
    if cfg.positional_embedding_type == "alibi":  # slopes as Hugging Face's, any head count
        from transformers.models.bloom.modeling_bloom import build_alibi_tensor

        expected = build_alibi_tensor(torch.ones(1, 2), cfg.n_heads, torch.float32)[:, 0, 1]
        assert torch.equal(model.blocks[0].attn.alibi_slopes, expected)
        assert (
            "embed.ln.hook_normalized" in model.hook_dict
            and "hook_pos_embed" not in model.hook_dict
        )
    if hf_class is transformers.OPTForCausalLM:  # positions start at row 2 of the table
        hf_model = hf_class.from_pretrained(loaded[2])
        table = hf_model.model.decoder.embed_positions.weight
        assert torch.equal(model.W_pos, table[2:])


@pytest.mark.parametrize("case", list(CASES))
def test_bf16_checkpoint_equals_hugging_face_bf16(tmp_path, case):
    """A bf16 checkpoint in bf16: our logits are as close to Hugging Face's bf16 ones as those
    are to its fp32 ones."""
    hf_model = saved(tmp_path, case)
    hf_model.to(torch.bfloat16).save_pretrained(tmp_path)
    hf_class = type(hf_model)
    hf32 = hf_class.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf16 = hf_class.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    bf16 = HookedTransformer.from_pretrained_no_processing(tmp_path, dtype="bfloat16")
    assert bf16.W_E.dtype == torch.bfloat16
    with torch.no_grad():
        reference = hf32(tokens()).logits
        hf_error = (hf16(tokens()).logits.float() - reference).abs().max()
        assert (bf16(tokens()).float() - hf16(tokens()).logits.float()).abs().max() <= hf_error


@pytest.fixture(scope="module", params=list(CASES))
def pair(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    saved(folder, request.param)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return model, hf_model, request.param in SWITCHES_FREQUENCIES


def test_generation_equals_hugging_face_generate(pair):
    """Greedy generation with our KV cache equals it without the cache and Hugging Face's
    ``generate``, alone and on a left-padded batch (longer than every window)."""
    model, hf_model, switches = pair
    prompt = padded_prompts()[0][:1]
    cached = ours(model, prompt)
    assert torch.equal(cached, theirs(hf_model, prompt))
    batch_tokens, mask = padded_prompts()
    batch = ours(model, batch_tokens, attention_mask=mask)
    assert torch.equal(batch, theirs(hf_model, batch_tokens, mask))
    assert torch.equal(cached, ours(model, prompt, use_past_kv_cache=False))
    if switches:
        return
    for row, length in enumerate(PROMPT_LENGTHS):
        alone = ours(model, batch_tokens[row : row + 1, batch_tokens.shape[1] - length :])
        assert torch.equal(batch[row, -N_NEW:], alone[0, -N_NEW:]), row


@pytest.mark.parametrize("case", list(CASES))
def test_from_pretrained_processing_keeps_the_logits(tmp_path, case):
    """``from_pretrained``'s folds (norms into weights, centred writing weights and
    unembedding, value biases into the output bias) change no log-probability."""
    saved(tmp_path, case)
    plain = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)
    processed = HookedTransformer.from_pretrained(tmp_path, tokenizer=None)
    with torch.no_grad():
        expected = plain(tokens()).log_softmax(-1)
        got = processed(tokens()).log_softmax(-1)
    bound = within_contract(1e-4, model_error_bound(plain.cfg, 4 * expected.abs().max()))
    assert (got - expected).abs().max() <= bound


@pytest.mark.parametrize(
    "case",
    [
        "opt-biases-tied",
        "gpt-neo-window-3",
        "gptj-rotary-quarter",
        "olmo2-gqa2-post-norms",
        "bloom-alibi-6-heads",
    ],
)
def test_hooks_lists_transformer_lens_names(tmp_path, case, capsys):
    saved(tmp_path, case)
    word_tokenizer().save_pretrained(tmp_path)
    assert main(["hooks", "--model", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    listed = dict(line.split(maxsplit=1) for line in lines[1:])
    assert listed.keys() == model.hook_dict.keys()
    rotary = model.cfg.positional_embedding_type == "rotary"
    assert ("hook_pos_embed" in listed) == (model.cfg.positional_embedding_type == "standard")
    assert ("blocks.0.attn.hook_rot_q" in listed) == rotary
    assert ("blocks.0.hook_resid_mid" in listed) != model.cfg.parallel_attn_mlp
    for name in ["blocks.1.attn.hook_pattern", "blocks.1.mlp.hook_post", "ln_final.hook_scale"]:
        assert name in listed


@pytest.mark.parametrize(
    ("case", "field", "value", "message"),
    [
        ("opt-biases-tied", "do_layer_norm_before", False, "'do_layer_norm_before' is false"),
        ("opt-biases-tied", "word_embed_proj_dim", 32, "'word_embed_proj_dim' is 32"),
        ("gpt-neo-window-3", "attention_types", [[["global", "local"], 2]], "num_layers=2"),
        ("gpt-neo-window-3", "attention_types", [[["global", "sliding"], 1]], "'local'"),
        ("gptj-rotary-quarter", "rotary_dim", 17, "'rotary_dim' is 17"),
        ("phi-partial-0.4", "qk_layernorm", True, "'qk_layernorm' is true"),
        ("phi3-gqa2-window-5", "sliding_window", 0, "'sliding_window' is 0"),
        (
            "bloom-alibi-6-heads",
            "apply_residual_connection_post_layernorm",
            True,
            "'apply_residual_connection_post_layernorm' is true",
        ),
        (
            "phi3-longrope-past-original-8",
            "rope_parameters",
            dict(rope_type="longrope", short_factor=[1.0] * 3, long_factor=[2.0] * 8),
            "'rope_parameters.short_factor' is \\[1.0, 1.0, 1.0\\]; LongRoPE needs a list of 8",
        ),
        (
            "phi3-gqa2-window-5",
            "rope_parameters",
            dict(rope_type="yarn", factor=4.0),
            "rope type 'yarn' \\(field 'rope_parameters'\\) is not supported",
        ),
    ],
)
def test_contradictory_configs_name_the_field(tmp_path, case, field, value, message):
    saved(tmp_path, case)
    config = json.loads((tmp_path / "config.json").read_text())
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)


def test_longrope_config_fields_are_checked():
    """LongRoPE's fields in a HookedTransformerConfig: all three or none, one factor per
    rotary frequency, and no second rope scaling."""
    base = dict(n_layers=1, d_model=16, n_ctx=32, n_heads=2, positional_embedding_type="rotary")
    longrope = dict(
        longrope_short_factor=[1.0] * 4, longrope_long_factor=[2.0] * 4, longrope_original_ctx_len=8
    )
    HookedTransformerConfig(**base, **longrope)
    with pytest.raises(ValueError, match="longrope_long_factor, longrope_original_ctx_len not"):
        HookedTransformerConfig(**base, longrope_short_factor=[1.0] * 4)
    with pytest.raises(ValueError, match="longrope_short_factor must list 4 positive numbers"):
        HookedTransformerConfig(**base, **longrope | dict(longrope_short_factor=[1.0] * 3))
    with pytest.raises(ValueError, match="two rope scalings"):
        HookedTransformerConfig(**base, **longrope, rotary_scaling_factor=2.0)
    with pytest.raises(ValueError, match="takes effect only with LongRoPE"):
        HookedTransformerConfig(**base, longrope_attention_factor=1.2)


def test_olmo2_config_fields_that_contradict_are_named():
    base = dict(n_layers=1, d_model=16, n_ctx=32, n_heads=2, normalization_type="RMS")
    with pytest.raises(ValueError, match="excludes use_normalization_before_and_after"):
        HookedTransformerConfig(
            **base, use_post_norms_only=True, use_normalization_before_and_after=True
        )
    with pytest.raises(ValueError, match="needs a normalization_type"):
        HookedTransformerConfig(**base | dict(normalization_type=None), use_post_norms_only=True)
    with pytest.raises(ValueError, match="qk_norm_across_heads=True .* use_qk_norm=False"):
        HookedTransformerConfig(**base, qk_norm_across_heads=True)


PATCH_SWEEPS = [
    ("get_act_patch_resid_pre", "resid_pre", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_attn_out", "attn_out", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_attn_head_k_by_pos", "k", "layer_pos_head_vector_patch_setter", "lph"),
]


@pytest.mark.parametrize("sweep_args", PATCH_SWEEPS, ids=[s[0] for s in PATCH_SWEEPS])
@pytest.mark.parametrize(
    "case", ["bloom-alibi-6-heads", "olmo2-gqa2-post-norms", "gpt-neo-window-3"]
)
def test_batched_patching_equals_one_forward_per_index(tmp_path, case, sweep_args):
    """Packed patching runs (prompt positions kept, restarting from cached keys) equal one
    forward per index on ALiBi, OLMo 2's norms and GPT-Neo's windows."""
    from interp import patching
    from interp.patching import LogitDiff
    from tests.patching.test_patching import naive_patch

    function_name, activation, setter_name, kind = sweep_args
    saved(tmp_path, case)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None).eval()
    clean = tokens()[:, :8]
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 7) % VOCAB
    corrupted[:, 5] = (clean[:, 5] + 3) % VOCAB
    metric = LogitDiff(torch.tensor([[3, 9], [11, 4]]))
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
    n_heads = model.cfg.n_heads if activation != "k" else model.cfg.n_key_value_heads
    sizes = {"l": model.cfg.n_layers, "p": clean.shape[1], "h": n_heads or model.cfg.n_heads}
    shape = tuple(sizes[axis] for axis in kind)
    setter = getattr(patching, setter_name)
    with torch.no_grad():
        expected = naive_patch(model, corrupted, clean_cache, metric, setter, activation, shape)
    sweep = getattr(patching, function_name)
    result = sweep(model, corrupted, clean_cache, metric, max_batch_size=6, progress=False)
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    assert (expected - expected.flatten()[0]).abs().max() > 1e-3  # the patches do something


FAMILIES2_CONFIGS = json.loads(
    (Path(__file__).parents[1] / "tl218_reference" / "api" / "families2_configs.json").read_text()
)


@pytest.mark.parametrize("family", list(FAMILIES2_CONFIGS))
def test_pretrained_model_config_equals_transformer_lens(family, monkeypatch, hub_cache):  # noqa: F811
    """``get_pretrained_model_config`` of the new families, from a local folder and from the
    hub cache offline, field for field TransformerLens 2.18's (fixture written by
    tests/tl218_reference/make_families2_configs.py), its quirks included."""
    from interp import loading_from_pretrained as loading
    from tests.loading.test_loading_from_pretrained import REPO, assert_same_fields

    monkeypatch.chdir(REPO)  # TL's fixture took the folder's path relative to the repository
    case = FAMILIES2_CONFIGS[family]
    for expected in (case["from_folder"], case["from_cache"]):
        if not expected["use_attn_scale"]:  # TL leaves -1 there and divides by 1; interp says 1
            assert expected.pop("attn_scale") == -1.0
    assert_same_fields(loading.get_pretrained_model_config(case["local_path"]), case["from_folder"])
    hub_cache.add(case["official_name"], {"config.json": REPO / case["local_path"] / "config.json"})
    cfg = loading.get_pretrained_model_config(case["official_name"])
    assert_same_fields(cfg, case["from_cache"])
