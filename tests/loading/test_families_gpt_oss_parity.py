"""gpt-oss against Hugging Face itself, on tiny random configs where each hard part bites:
attention sinks large enough to take real mass, sliding windows shorter than the prompt,
YaRN scaling with the prompt past the original context (a ramp with blended frequencies),
biases everywhere, a router bias that loads one expert more than the others, and MXFP4
expert weights. fp32 logits within 1e-4 of Hugging Face's eager attention (gpt-oss has no
sdpa), patterns equal to ``output_attentions`` (the sink's column dropped), routing equal
to Hugging Face's top-k of its router logits on every token, bf16 as close to Hugging
Face's bf16 as that is to fp32, KV-cache greedy generation equal to ``generate``, and
contradictory configs named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers
from safetensors.torch import load_file, save_file

from interp import HookedTransformer, HookedTransformerConfig, patching
from interp.cli import main
from interp.loading.processing import process_weights
from tests.cli.test_cli_families import word_tokenizer
from tests.loading.test_families_parity import VOCAB, tokens
from tests.model.test_generation_families import ours, padded_prompts, theirs
from tests.patching.test_patching import naive_patch
from tests.support.tolerances import logits_bound, model_error_bound

BASE = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=32,
    head_dim=16,
    num_attention_heads=4,
)
CASES = {
    # beta_fast/slow set so the ramp between kept and interpolated frequencies lies inside
    # the 8 frequencies, with the 12-token prompt past the original context of 8.
    "gpt-oss-yarn-ramp-window-4": dict(
        num_hidden_layers=2,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=4,
        max_position_embeddings=32,  # YaRN's factor times the original context
        rope_parameters=dict(
            rope_type="yarn",
            rope_theta=100.0,
            factor=4.0,
            beta_fast=4.0,
            beta_slow=0.25,
            truncate=False,
            original_max_position_embeddings=8,
        ),
    ),
    "gpt-oss-3-layers-mha-top1-no-attention-bias": dict(
        num_hidden_layers=3,
        num_key_value_heads=4,
        num_local_experts=3,
        num_experts_per_tok=1,
        sliding_window=3,
        attention_bias=False,
        swiglu_limit=1.5,
        max_position_embeddings=64,
        layer_types=["full_attention", "sliding_attention", "sliding_attention"],
        rope_parameters=dict(
            rope_type="yarn",
            rope_theta=10000.0,
            factor=8.0,
            attention_factor=1.3,
            original_max_position_embeddings=8,
        ),
    ),
}


def make(case: str) -> transformers.GptOssForCausalLM:
    """Case ``case``'s model (seed 0): weights ~ N(0, 0.3), norms and biases near their init,
    sinks ~ N(2, 2) (each takes a real share of its softmax), expert 0 favoured by the
    router's bias."""
    torch.manual_seed(0)
    model = transformers.GptOssForCausalLM(transformers.GptOssConfig(**BASE, **CASES[case]))
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name.endswith("sinks"):
                param.copy_(2.0 + 2.0 * noise)
            else:
                param.copy_(noise * 0.3 if param.ndim >= 2 else param + noise * 0.3)
        for layer in model.model.layers:
            layer.mlp.router.bias[0] += 4.0
    return model.eval()


@pytest.fixture(scope="module")
def first_case(tmp_path_factory) -> Path:
    """The first case saved once, for the tests that only edit its config or reload it."""
    folder = tmp_path_factory.mktemp("first-case")
    make("gpt-oss-yarn-ramp-window-4").save_pretrained(folder)
    return folder


def edited_copy(folder: Path, destination: Path, **edit) -> Path:
    """``folder``'s checkpoint in ``destination``: its config.json with ``edit``, its
    weights linked."""
    config = json.loads((folder / "config.json").read_text()) | edit
    (destination / "config.json").write_text(json.dumps(config))
    (destination / "model.safetensors").symlink_to(folder / "model.safetensors")
    return destination


@pytest.fixture(scope="module", params=list(CASES))
def loaded(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    make(request.param).save_pretrained(folder)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    hf_model = transformers.GptOssForCausalLM.from_pretrained(
        folder, attn_implementation="eager"
    ).eval()
    return model, hf_model


def test_logits_patterns_and_routing_equal_hugging_face(loaded):
    model, hf_model = loaded
    assert model.cfg.use_attn_sinks and model.cfg.use_yarn_rope and model.cfg.use_local_attn
    with torch.no_grad():
        hf = hf_model(tokens(), output_attentions=True, output_router_logits=True)
        logits = model(tokens())
        hooked_logits, cache = model.run_with_cache(tokens())
    bound = logits_bound(model.cfg, hf.logits)
    assert (logits - hf.logits).abs().max() <= bound
    assert (hooked_logits - hf.logits).abs().max() <= bound
    k = model.cfg.experts_per_token
    loads = torch.zeros(model.cfg.num_experts)
    for layer, hf_pattern in enumerate(hf.attentions):
        scores = cache["attn_scores", layer][cache["attn_scores", layer].isfinite()]
        pattern_bound = model_error_bound(model.cfg, 2 * scores.abs().max())
        assert (cache["pattern", layer] - hf_pattern).abs().max() <= pattern_bound, layer
        router_logits = hf.router_logits[layer]  # [batch * pos, num_experts]
        ours_logits = cache[f"blocks.{layer}.mlp.hook_router_logits"].flatten(0, 1)
        assert (ours_logits - router_logits).abs().max() <= pattern_bound
        indices = cache[f"blocks.{layer}.mlp.hook_expert_indices"].flatten(0, 1)
        assert torch.equal(indices, router_logits.topk(k, dim=-1).indices), layer
        loads += torch.bincount(indices.flatten(), minlength=model.cfg.num_experts)
    # The sinks take real mass: some query gives them most of its attention.
    assert min(p.sum(-1).min() for p in hf.attentions) < 0.5
    # The window bites (a sliding layer sees fewer keys than the prompt has) and YaRN's
    # prompt runs past the original context.
    assert model.cfg.window_size < tokens().shape[1] > model.cfg.yarn_original_ctx_len
    # Uneven expert load: the favoured expert gets at least twice the least-loaded one's.
    assert loads.max() >= 2 * loads.min()


def test_yarn_frequencies_and_attention_factor_equal_hugging_face(loaded):
    model, hf_model = loaded
    rotary = model.blocks[0].attn.rotary
    hf_rotary = hf_model.model.rotary_emb
    assert torch.equal(rotary.inv_freq, hf_rotary.inv_freq)
    assert rotary.attention_factor == hf_rotary.attention_scaling
    if model.cfg.yarn_beta_slow < 1:  # the ramp case: a frequency neither kept nor divided
        scaled, factor = rotary.inv_freq, model.cfg.yarn_factor
        unscaled = 1.0 / (model.cfg.rotary_base ** (torch.arange(0, 16, 2).float() / 16))
        assert ((scaled < unscaled * 0.99) & (scaled > unscaled / factor * 1.01)).any()


def test_sinks_are_a_weight_and_hooks_have_transformer_lens_names(loaded):
    model, hf_model = loaded
    assert torch.equal(model.blocks[1].attn.W_sinks, hf_model.model.layers[1].self_attn.sinks)
    for name in [
        "blocks.0.mlp.hook_expert_weights",
        "blocks.0.mlp.hook_expert_indices",
        "blocks.0.mlp.hook_router_logits",
        "blocks.0.mlp.experts.0.hook_gate",
        "blocks.0.mlp.experts.0.hook_pre",
        "blocks.0.mlp.experts.0.hook_post",
        "blocks.1.attn.hook_pattern",
    ]:
        assert name in model.hook_dict, name


def test_from_pretrained_processing_keeps_the_logits(first_case):
    """``from_pretrained``'s folds keep every log-probability: ``fold_ln`` folds ``ln2`` into
    the router and every expert; ``fold_value_biases`` would be wrong with sinks (a pattern
    sums to less than 1), so it is skipped with a warning naming them."""
    plain = HookedTransformer.from_pretrained_no_processing(first_case, tokenizer=None)
    with pytest.warns(UserWarning, match="attention sinks \\(use_attn_sinks\\) take part"):
        processed = HookedTransformer.from_pretrained(first_case, tokenizer=None)
    assert processed.cfg.normalization_type == "RMSPre"
    with torch.no_grad():
        expected = plain(tokens()).log_softmax(-1)
        got = processed(tokens()).log_softmax(-1)
    assert (got - expected).abs().max() <= logits_bound(plain.cfg, 4 * expected.abs().max())
    with pytest.raises(ValueError, match="fold_value_biases moves b_V into b_O"):
        process_weights(plain, fold_ln=False, center_writing_weights=False, center_unembed=False)


def test_a_hook_choosing_experts_routes_them_and_a_missing_one_is_named(loaded):
    model, _ = loaded
    name = "blocks.0.mlp.hook_expert_indices"
    with torch.no_grad():
        _, cache = model.run_with_cache(tokens(), names_filter=name)
        flipped = cache[name].flip(-1)  # the same experts, the second choice first
        same = model.run_with_hooks(tokens(), fwd_hooks=[(name, lambda act, hook: flipped)])
        torch.testing.assert_close(same, model(tokens()), atol=1e-5, rtol=0)
        with pytest.raises(ValueError, match="hook_expert_indices holds expert 9, but this MoE"):
            model.run_with_hooks(tokens(), fwd_hooks=[(name, lambda act, hook: act * 0 + 9)])


def test_interp_hooks_lists_the_routing_hooks(first_case, tmp_path, capsys):
    folder = edited_copy(first_case, tmp_path)
    word_tokenizer().save_pretrained(folder)
    assert main(["hooks", "--model", str(folder)]) == 0
    listed = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines()[1:])
    model = HookedTransformer.from_pretrained_no_processing(folder)
    assert listed.keys() == model.hook_dict.keys()
    for name in [
        "blocks.1.attn.hook_pattern",
        "blocks.1.mlp.hook_expert_indices",
        "blocks.1.mlp.experts.3.hook_post",
        "blocks.0.mlp.hook_router_logits",
    ]:
        assert name in listed


@pytest.mark.parametrize("loaded", ["gpt-oss-yarn-ramp-window-4"], indirect=True)
def test_generation_equals_hugging_face_generate(loaded):
    model, hf_model = loaded
    prompt = padded_prompts()[0][:1]
    cached = ours(model, prompt)
    assert torch.equal(cached, theirs(hf_model, prompt))
    assert torch.equal(cached, ours(model, prompt, use_past_kv_cache=False))
    batch_tokens, mask = padded_prompts()
    assert torch.equal(
        ours(model, batch_tokens, attention_mask=mask), theirs(hf_model, batch_tokens, mask)
    )


def test_bf16_checkpoint_equals_hugging_face_bf16(tmp_path):
    make("gpt-oss-yarn-ramp-window-4").to(torch.bfloat16).save_pretrained(tmp_path)
    hf32 = transformers.GptOssForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf16 = transformers.GptOssForCausalLM.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    bf16 = HookedTransformer.from_pretrained_no_processing(tmp_path, dtype="bfloat16")
    assert bf16.W_E.dtype == torch.bfloat16
    with torch.no_grad():
        reference = hf32(tokens()).logits
        hf_error = (hf16(tokens()).logits.float() - reference).abs().max()
        assert (bf16(tokens()).float() - hf16(tokens()).logits.float()).abs().max() <= hf_error


def quantized_folder(folder: Path, case: str) -> transformers.GptOssForCausalLM:
    """Case ``case`` saved with MXFP4 experts, as the published checkpoints are: random
    blocks and scales replace each expert weight, and Hugging Face's own dequantizer gives
    the reference model's weights."""
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    hf_model = make(case)
    hf_model.save_pretrained(folder)
    tensors = load_file(folder / "model.safetensors")
    generator = torch.Generator().manual_seed(3)
    for name in [name for name in tensors if name.endswith(("gate_up_proj", "down_proj"))]:
        experts, columns, rows = tensors.pop(name).shape
        shape = (experts, rows, columns // 32, 16)
        blocks = torch.randint(0, 256, shape, generator=generator).to(torch.uint8)
        scales = torch.randint(122, 127, shape[:-1], generator=generator).to(torch.uint8)
        tensors[name + "_blocks"], tensors[name + "_scales"] = blocks, scales
        module_name, _, attribute = name.removeprefix("model.").rpartition(".")
        weight = convert_moe_packed_tensors(blocks, scales, dtype=torch.float32)
        with torch.no_grad():
            getattr(hf_model.model.get_submodule(module_name), attribute).copy_(weight)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = dict(quant_method="mxfp4", modules_to_not_convert=[])
    (folder / "config.json").write_text(json.dumps(config))
    return hf_model


def test_mxfp4_experts_load_dequantized(tmp_path):
    case = "gpt-oss-yarn-ramp-window-4"
    hf_model = quantized_folder(tmp_path, case)
    model = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None).eval()
    gate_up = hf_model.model.layers[1].mlp.experts.gate_up_proj[2]
    assert torch.equal(model.blocks[1].mlp.experts[2].W_gate, gate_up[:, 0::2])
    assert torch.equal(model.blocks[1].mlp.experts[2].W_in, gate_up[:, 1::2])
    down = hf_model.model.layers[0].mlp.experts.down_proj[3]
    assert torch.equal(model.blocks[0].mlp.experts[3].W_out, down)
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


@pytest.mark.parametrize(
    ("sweep_name", "activation", "setter_name", "shape"),
    [
        ("get_act_patch_resid_pre", "resid_pre", "layer_pos_patch_setter", "lp"),
        (
            "get_act_patch_attn_head_pattern_all_pos",
            "pattern",
            "layer_head_pattern_patch_setter",
            "lh",
        ),
    ],
)
@pytest.mark.parametrize("loaded", ["gpt-oss-yarn-ramp-window-4"], indirect=True)
def test_batched_patching_equals_one_forward_per_index(
    loaded, sweep_name, activation, setter_name, shape
):
    """Packed patching runs keep their positions (YaRN, the window), their sinks and their
    routing: each value equals one full forward pass with that one patch."""
    model, _ = loaded
    clean = tokens()[:, :10]
    corrupted = clean.clone()
    corrupted[:, 3] = (clean[:, 3] + 11) % VOCAB

    def metric(logits):
        return logits[:, -1].log_softmax(dim=-1)[:, 5].mean()

    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
        sizes = {"l": model.cfg.n_layers, "p": clean.shape[1], "h": model.cfg.n_heads}
        grid = tuple(sizes[axis] for axis in shape)
        setter = getattr(patching, setter_name)
        expected = naive_patch(model, corrupted, clean_cache, metric, setter, activation, grid)
    sweep = getattr(patching, sweep_name)
    result = sweep(model, corrupted, clean_cache, metric, max_batch_size=6, progress=False)
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    assert (expected - expected.flatten()[0]).abs().max() > 1e-3  # the patches do something


@pytest.mark.parametrize("layout", ["rope_scaling", "no rope settings"])
def test_older_and_missing_rope_settings_read_as_hugging_face_reads_them(
    first_case, tmp_path, layout
):
    """The older ``rope_scaling`` + ``rope_theta`` fields (the published config.json's), or
    none at all (GptOssConfig's YaRN default and its rope_theta of 150000)."""
    config = json.loads((first_case / "config.json").read_text())
    rope = config.pop("rope_parameters")
    edit = {"rope_parameters": None}
    if layout == "rope_scaling":
        edit |= dict(rope_theta=rope.pop("rope_theta"), rope_scaling=rope)
    folder = edited_copy(first_case, tmp_path, **edit)
    hf_model = transformers.GptOssForCausalLM.from_pretrained(folder).eval()
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    assert torch.equal(model.blocks[0].attn.rotary.inv_freq, hf_model.model.rotary_emb.inv_freq)
    with torch.no_grad():
        expected = hf_model(tokens()).logits
        assert (model(tokens()) - expected).abs().max() <= logits_bound(model.cfg, expected)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            dict(layer_types=["full_attention", "full_attention"]),
            "field 'sliding_window' is 4, but field 'layer_types' has no 'sliding_attention'",
        ),
        (
            dict(sliding_window=None),
            "field 'layer_types' has 'sliding_attention' layers, but field 'sliding_window' "
            "is null",
        ),
        (
            dict(rope_parameters=dict(rope_type="dynamic", rope_theta=1e4, factor=2.0)),
            "rope type 'dynamic' \\(field 'rope_parameters'\\) is not supported for gpt-oss",
        ),
        (dict(num_experts_per_tok=5), "experts_per_token=5 is more than num_experts=4"),
        (
            dict(quantization_config=dict(quant_method="bitsandbytes")),
            "field 'quantization_config.quant_method' is 'bitsandbytes'",
        ),
    ],
)
def test_contradictory_configs_name_the_fields(first_case, tmp_path, edit, message):
    folder = edited_copy(first_case, tmp_path, **edit)
    with pytest.raises(ValueError, match=message):
        HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (dict(use_yarn_rope=True), "use_yarn_rope=True needs yarn_original_ctx_len"),
        (
            dict(use_yarn_rope=True, yarn_original_ctx_len=8, rotary_scaling_factor=2.0),
            "use_yarn_rope=True and another rope scaling",
        ),
        (dict(experts_swiglu_limit=7.0), "experts_swiglu_limit=7.0 clamps gpt-oss's experts"),
    ],
)
def test_contradictory_hooked_configs_name_the_fields(fields, message):
    base = dict(n_layers=1, d_model=16, n_ctx=8, n_heads=2, d_vocab=10)
    with pytest.raises(ValueError, match=message):
        HookedTransformerConfig(**base, positional_embedding_type="rotary", **fields)
