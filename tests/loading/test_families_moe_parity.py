"""The mixture-of-experts families against Hugging Face itself: Mixtral, Qwen2-MoE (its shared
expert, top-k weights not renormalised), Qwen3-MoE (renormalised, QK norms) and OLMoE (QK
norms over all heads, top 4), as random-weight tiny models (2 layers, 4 to 8 experts, top 2) saved
with save_pretrained and loaded with ``from_pretrained_no_processing``: fp32 logits within
1e-4 of Hugging Face's eager and sdpa attention, patterns equal to ``output_attentions``, the
chosen experts equal to the top-k of Hugging Face's router logits on every token (under an
uneven load), bf16 logits as close to Hugging Face's bf16 as those are to fp32, KV-cache and
left-padded greedy generation equal to ``generate``, ``from_pretrained``'s folds keeping the
logits, packed patching runs equal to one forward per index, and the routing hooks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import main
from interp.harvest import harvest
from interp.sae import SAE, HookedSAETransformer, SAEConfig
from tests.cli.test_cli_families import word_tokenizer
from tests.loading.test_families_parity import SMALL, VOCAB, Case, hugging_face, randomize, tokens
from tests.model.test_generation_families import PROMPT_LENGTHS, ours, padded_prompts, theirs
from tests.support.hub_cache import hub_cache  # noqa: F401 (a fixture)
from tests.support.tolerances import (
    logits_bound,
    model_error_bound,
    model_tolerance,
    within_contract,
)

pytestmark = pytest.mark.usefixtures("one_thread")
EXPERTS = dict(num_key_value_heads=2, num_experts_per_tok=2)


def mixtral(**kwargs) -> transformers.MixtralForCausalLM:
    config = transformers.MixtralConfig(**SMALL | EXPERTS | kwargs)
    return transformers.MixtralForCausalLM(config)


def qwen2_moe(**kwargs) -> transformers.Qwen2MoeForCausalLM:
    fields = dict(moe_intermediate_size=40, shared_expert_intermediate_size=72)
    config = transformers.Qwen2MoeConfig(**SMALL | EXPERTS | fields | kwargs)
    return transformers.Qwen2MoeForCausalLM(config)


def qwen3_moe(**kwargs) -> transformers.Qwen3MoeForCausalLM:
    config = transformers.Qwen3MoeConfig(
        **SMALL | EXPERTS | dict(moe_intermediate_size=40) | kwargs
    )
    return transformers.Qwen3MoeForCausalLM(config)


def olmoe(**kwargs) -> transformers.OlmoeForCausalLM:
    config = transformers.OlmoeConfig(
        **SMALL | EXPERTS | dict(pad_token_id=0, eos_token_id=1) | kwargs
    )
    return transformers.OlmoeForCausalLM(config)


CASES = {
    "mixtral-8-experts": Case(lambda: mixtral(num_local_experts=8)),
    "mixtral-4-experts-window-5-tied": Case(
        lambda: mixtral(num_local_experts=4, sliding_window=5, tie_word_embeddings=True)
    ),
    "qwen2-moe-shared-expert": Case(lambda: qwen2_moe(num_experts=8)),
    "qwen3-moe-renormalised-head-dim-32": Case(
        lambda: qwen3_moe(num_experts=6, norm_topk_prob=True, head_dim=32)
    ),
    "olmoe-qk-norm-across-heads-top-4": Case(lambda: olmoe(num_experts=8, num_experts_per_tok=4)),
}


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
    return type(hf_model), folder, model


def test_logits_patterns_and_routing_equal_hugging_face(loaded):
    hf_class, folder, model = loaded
    eager = hugging_face(hf_class, folder, "eager")
    hf_model = hf_class.from_pretrained(folder).eval()
    with torch.no_grad():
        logits = model(tokens())  # fused attention (no hooks)
        hooked_logits, cache = model.run_with_cache(tokens())
        router_logits = hf_model(tokens(), output_router_logits=True).router_logits
    bound = logits_bound(model.cfg, eager.logits)
    assert (logits - eager.logits).abs().max() <= bound
    assert (hooked_logits - eager.logits).abs().max() <= bound
    sdpa = hugging_face(hf_class, folder, "sdpa")
    assert (logits - sdpa.logits).abs().max() <= bound
    for layer, hf_pattern in enumerate(eager.attentions):
        scores = cache["attn_scores", layer][cache["attn_scores", layer].isfinite()]
        pattern_bound = model_error_bound(model.cfg, 2 * scores.abs().max())
        assert (cache["pattern", layer] - hf_pattern).abs().max() <= pattern_bound, layer
    k, n_experts = model.cfg.experts_per_token, model.cfg.num_experts
    for layer, hf_logits in enumerate(router_logits):  # [batch * pos, num_experts]
        mlp = f"blocks.{layer}.mlp."
        ours_logits = cache[mlp + "hook_router_logits"].reshape(-1, n_experts)
        assert (ours_logits - hf_logits).abs().max() <= model_error_bound(model.cfg, hf_logits)
        chosen = cache[mlp + "hook_expert_indices"].reshape(-1, k)
        assert torch.equal(chosen, hf_logits.topk(k, dim=-1).indices), layer
        load = torch.bincount(chosen.flatten(), minlength=n_experts)
        assert load.max() > load.min() + 2, load  # uneven: some experts far busier
        for expert in range(n_experts):  # each expert's hooks see its own tokens only
            assert cache[f"{mlp}experts.{expert}.hook_post"].shape == (
                load[expert],
                model.cfg.d_mlp,
            )


def test_an_in_memory_model_loads_as_its_checkpoint(loaded):
    """``from_hf_model`` reads transformers 5's fused in-memory experts as the checkpoint's."""
    from interp.loading.hf import from_hf_model

    hf_class, folder, model = loaded
    hf_model = hf_class.from_pretrained(folder).eval()
    assert any(name.endswith("experts.down_proj") for name, _ in hf_model.named_parameters())
    in_memory = from_hf_model(hf_model, tokenizer=None)
    for name, param in model.state_dict().items():
        assert torch.equal(in_memory.state_dict()[name], param), name


def test_hard_parts_bite(loaded):
    """The shared expert and its gate, the window, unnormalised top-k weights and QK norms
    over all heads are there and change the output."""
    _, _, model = loaded
    cfg = model.cfg
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens())
    weights = cache["blocks.0.mlp.hook_expert_weights"]  # softmax over every expert
    torch.testing.assert_close(weights.sum(-1), torch.ones(weights.shape[:-1]))
    if cfg.d_mlp_shared_expert is not None:
        gate = cache["blocks.0.mlp.hook_shared_expert_gate"]
        assert gate.shape == (*tokens().shape, 1) and (gate > 0.05).all() and (gate < 0.95).all()
        assert cache["blocks.0.mlp.shared_expert.hook_post"].shape[-1] == cfg.d_mlp_shared_expert
    if cfg.use_local_attn:
        assert (cache["pattern", 0][..., -1, : -cfg.window_size] == 0).all()
    if cfg.qk_norm_across_heads:
        assert model.blocks[0].attn.q_norm.w.shape == (cfg.n_heads * cfg.d_head,)
    expected = {"MixtralForCausalLM": True, "Qwen3MoeForCausalLM": True}
    assert cfg.norm_topk_prob == expected.get(cfg.original_architecture, False)
    assert cfg.expert_weights_in_float32 == (cfg.original_architecture == "MixtralForCausalLM")


def test_routing_hooks_edit_the_routing(loaded):
    """Expert e's hooks hold its tokens' rows in TransformerLens's order (top choices first,
    then second choices); a hook on ``hook_expert_indices`` reroutes the tokens, and the
    model is unchanged afterwards."""
    _, _, model = loaded
    k, n_experts = model.cfg.experts_per_token, model.cfg.num_experts
    moe = model.blocks[1].mlp
    with torch.no_grad():
        before = model(tokens())
        plain, cache = model.run_with_cache(tokens())
        mlp_in = (
            model.blocks[1].ln2(cache["blocks.1.hook_resid_mid"]).reshape(-1, model.cfg.d_model)
        )
        indices = cache["blocks.1.mlp.hook_expert_indices"].reshape(-1, k)
        for expert in (0, n_experts - 1):
            routed = [
                t for slot in range(k) for t in range(len(indices)) if indices[t, slot] == expert
            ]
            expected = mlp_in[routed] @ moe.experts[expert].W_gate
            got = cache[f"blocks.1.mlp.experts.{expert}.hook_gate"]
            torch.testing.assert_close(got, expected, **model_tolerance(model.cfg, expected))
        rerouted = model.run_with_hooks(
            tokens(),
            fwd_hooks=[
                ("blocks.1.mlp.hook_expert_indices", lambda idx, hook: (idx + 1) % n_experts)
            ],
        )
        out_of_range = ("blocks.1.mlp.hook_expert_indices", lambda idx, hook: idx + n_experts)
        with pytest.raises(ValueError, match=f"holds expert .* num_experts={n_experts}"):
            model.run_with_hooks(tokens(), fwd_hooks=[out_of_range])
    assert (rerouted - plain).abs().max() > 1e-3
    assert torch.equal(model(tokens()), before)


@pytest.mark.parametrize("case", list(CASES))
def test_bf16_checkpoint_equals_hugging_face_bf16(tmp_path, case):
    hf_model = saved(tmp_path, case)
    hf_model.to(torch.bfloat16).save_pretrained(tmp_path)
    hf_class = type(hf_model)
    hf32 = hf_class.from_pretrained(tmp_path, dtype=torch.float32).eval()
    hf16 = hf_class.from_pretrained(tmp_path, dtype=torch.bfloat16).eval()
    bf16 = HookedTransformer.from_pretrained_no_processing(tmp_path, dtype="bfloat16")
    assert bf16.blocks[0].mlp.experts[0].W_in.dtype == torch.bfloat16
    with torch.no_grad():
        reference = hf32(tokens()).logits
        hf_error = (hf16(tokens()).logits.float() - reference).abs().max()
        assert (bf16(tokens()).float() - hf16(tokens()).logits.float()).abs().max() <= hf_error


@pytest.fixture(
    scope="module", params=["mixtral-4-experts-window-5-tied", "qwen2-moe-shared-expert"]
)
def pair(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    saved(folder, request.param)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(folder).eval()
    return model, hf_model


def test_generation_equals_hugging_face_generate(pair):
    """Greedy generation with our KV cache equals Hugging Face's ``generate``, alone and on a
    left-padded batch, whose rows equal each prompt alone."""
    model, hf_model = pair
    prompt = padded_prompts()[0][:1]
    cached = ours(model, prompt)
    assert torch.equal(cached, theirs(hf_model, prompt))
    assert torch.equal(cached, ours(model, prompt, use_past_kv_cache=False))
    batch_tokens, mask = padded_prompts()
    batch = ours(model, batch_tokens, attention_mask=mask)
    assert torch.equal(batch, theirs(hf_model, batch_tokens, mask))
    for row, length in enumerate(PROMPT_LENGTHS):
        alone = ours(model, batch_tokens[row : row + 1, batch_tokens.shape[1] - length :])
        assert torch.equal(batch[row, -alone.shape[1] + length :], alone[0, length:]), row


@pytest.mark.parametrize(
    "case", ["mixtral-8-experts", "qwen2-moe-shared-expert", "olmoe-qk-norm-across-heads-top-4"]
)
def test_from_pretrained_processing_keeps_the_logits(tmp_path, case):
    """fold_ln folds ln2 into the router and every expert (and the shared expert and its
    gate); the other default steps leave the experts alone."""
    saved(tmp_path, case)
    plain = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)
    processed = HookedTransformer.from_pretrained(tmp_path, tokenizer=None)
    assert processed.cfg.normalization_type == "RMSPre"
    with torch.no_grad():
        expected = plain(tokens()).log_softmax(-1)
        got, cache = processed.run_with_cache(tokens())
        _, plain_cache = plain.run_with_cache(tokens())
    bound = within_contract(1e-4, model_error_bound(plain.cfg, 4 * expected.abs().max()))
    assert (got.log_softmax(-1) - expected).abs().max() <= bound
    for layer in range(plain.cfg.n_layers):
        name = f"blocks.{layer}.mlp.hook_expert_indices"
        assert torch.equal(cache[name], plain_cache[name])


PATCH_SWEEPS = [
    ("get_act_patch_resid_pre", "resid_pre", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_mlp_out", "mlp_out", "layer_pos_patch_setter", "lp"),
]


@pytest.mark.parametrize("sweep_args", PATCH_SWEEPS, ids=[s[0] for s in PATCH_SWEEPS])
def test_batched_patching_equals_one_forward_per_index(tmp_path, sweep_args):
    """Packed patching runs route each token as its own forward does: equal to one forward
    per index on Mixtral."""
    from interp import patching
    from interp.patching import LogitDiff
    from tests.patching.test_patching import naive_patch

    function_name, activation, setter_name, kind = sweep_args
    saved(tmp_path, "mixtral-8-experts")
    model = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None).eval()
    clean = tokens()[:, :8]
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 7) % VOCAB
    corrupted[:, 5] = (clean[:, 5] + 3) % VOCAB
    metric = LogitDiff(torch.tensor([[3, 9], [11, 4]]))
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
    shape = (model.cfg.n_layers, clean.shape[1])
    setter = getattr(patching, setter_name)
    with torch.no_grad():
        expected = naive_patch(model, corrupted, clean_cache, metric, setter, activation, shape)
    sweep = getattr(patching, function_name)
    result = sweep(model, corrupted, clean_cache, metric, max_batch_size=6, progress=False)
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    assert (expected - expected.flatten()[0]).abs().max() > 1e-3  # the patches do something


@pytest.fixture(scope="module")
def mixtral_model(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixtral")
    saved(folder, "mixtral-8-experts")
    return HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None).eval()


def test_stacked_mlp_weights_name_the_experts(mixtral_model):
    with pytest.raises(ValueError, match="mixtures of 8 experts: no single W_in; .*experts\\[e\\]"):
        _ = mixtral_model.W_in
    assert mixtral_model.W_Q.shape[0] == mixtral_model.cfg.n_layers


def test_cache_decompositions_and_head_detector_on_a_mixture(mixtral_model):
    """The residual decomposition sums to the final residual stream (the MoE outputs are its
    mlp_out terms), DLA and the head detector run."""
    from interp.head_detector import detect_head

    with torch.no_grad():
        _, cache = mixtral_model.run_with_cache(tokens())
        parts, labels = cache.decompose_resid(layer=-1, return_labels=True)
        resid = cache[f"blocks.{mixtral_model.cfg.n_layers - 1}.hook_resid_post"]
        torch.testing.assert_close(parts.sum(0), resid, **model_tolerance(mixtral_model.cfg, resid))
        assert "1_mlp_out" in labels
        attrs = cache.logit_attrs(parts, tokens=torch.tensor([1, 2]))
        assert attrs.shape == (len(labels), *tokens().shape)
        scores = detect_head(mixtral_model, tokens()[0], "previous_token_head")
    assert scores.shape == (mixtral_model.cfg.n_layers, mixtral_model.cfg.n_heads)


def test_left_padded_batch_rows_equal_each_prompt_alone(mixtral_model):
    batch_tokens, mask = padded_prompts()
    with torch.no_grad():
        batch = mixtral_model(batch_tokens, attention_mask=mask)
        for row, length in enumerate(PROMPT_LENGTHS):
            alone = mixtral_model(batch_tokens[row : row + 1, -length:])
            within = model_tolerance(mixtral_model.cfg, alone)
            torch.testing.assert_close(batch[row : row + 1, -length:], alone, **within)


def test_sae_splice_on_an_expert_mixture_output(mixtral_model):
    """An SAE spliced at ``hook_mlp_out`` with its error term leaves the logits; without it,
    they change."""
    model = HookedSAETransformer.from_model(mixtral_model)
    torch.manual_seed(0)
    sae = SAE(SAEConfig(d_in=model.cfg.d_model, d_sae=128, hook_name="blocks.0.hook_mlp_out"))
    with torch.no_grad():
        for param in sae.parameters():
            param.add_(torch.randn_like(param) * 0.05)
        plain = model(tokens())
        spliced = model.run_with_saes(tokens(), saes=[sae], use_error_term=True)
        torch.testing.assert_close(
            spliced, plain, **model_tolerance(model.cfg, plain, spliced=(128,))
        )
        assert (model.run_with_saes(tokens(), saes=[sae]) - plain).abs().max() > 1e-3


def test_harvest_stores_run_with_cache_routing(mixtral_model, tmp_path):
    rows = tokens()
    np.save(tmp_path / "ids.npy", rows.numpy())
    hooks = ["blocks.1.mlp.hook_router_logits", "blocks.1.hook_mlp_out"]
    harvest(
        mixtral_model,
        tmp_path / "ids.npy",
        hooks,
        tmp_path / "out",
        seq_len=rows.shape[1],
        progress=False,
    )
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    from safetensors.torch import load_file

    shards = [load_file(tmp_path / "out" / record["file"]) for record in manifest["shards"]]
    with torch.no_grad():
        _, cache = mixtral_model.run_with_cache(rows, names_filter=hooks)
    for hook in hooks:
        expected = cache[hook].reshape(-1, cache[hook].shape[-1])
        got = torch.cat([shard[hook] for shard in shards])
        torch.testing.assert_close(got, expected, **model_tolerance(mixtral_model.cfg, expected))


def test_hooks_lists_the_expert_hooks(tmp_path, capsys):
    saved(tmp_path, "qwen2-moe-shared-expert")
    word_tokenizer().save_pretrained(tmp_path)
    assert main(["hooks", "--model", str(tmp_path)]) == 0
    listed = dict(line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines()[1:])
    model = HookedTransformer.from_pretrained_no_processing(tmp_path)
    assert listed.keys() == model.hook_dict.keys()
    for name in [
        "blocks.1.mlp.hook_router_logits",
        "blocks.1.mlp.hook_expert_weights",
        "blocks.1.mlp.hook_expert_indices",
        "blocks.1.mlp.experts.7.hook_gate",
        "blocks.1.mlp.experts.7.hook_pre",
        "blocks.1.mlp.experts.7.hook_post",
        "blocks.1.mlp.shared_expert.hook_post",
        "blocks.1.mlp.hook_shared_expert_gate",
    ]:
        assert name in listed


@pytest.mark.parametrize(
    ("case", "field", "value", "message"),
    [
        (
            "mixtral-8-experts",
            "num_experts_per_tok",
            9,
            "'num_experts_per_tok' is 9, more than the 8",
        ),
        ("qwen2-moe-shared-expert", "mlp_only_layers", [1], "give layers \\[1\\] a dense MLP"),
        (
            "qwen3-moe-renormalised-head-dim-32",
            "decoder_sparse_step",
            2,
            "give layers \\[0\\] a dense",
        ),
        ("qwen2-moe-shared-expert", "use_sliding_window", True, "'use_sliding_window' is true"),
        ("olmoe-qk-norm-across-heads-top-4", "clip_qkv", 8.0, "'clip_qkv' is 8.0"),
    ],
)
def test_contradictory_configs_name_the_field(tmp_path, case, field, value, message):
    saved(tmp_path, case)
    config = json.loads((tmp_path / "config.json").read_text())
    config[field] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)


MOE_CONFIGS = json.loads(
    (Path(__file__).parents[1] / "tl218_reference" / "api" / "moe_configs.json").read_text()
)


@pytest.mark.parametrize("family", list(MOE_CONFIGS))
def test_pretrained_model_config_equals_transformer_lens(family, monkeypatch, hub_cache):  # noqa: F811
    """``get_pretrained_model_config`` of Mixtral, from a local folder and from the hub cache
    offline, field for field TransformerLens 2.18's (fixture written by
    tests/tl218_reference/make_moe_configs.py), its quirks included (no window although the
    config has one, 32 "global" attn_types)."""
    from interp import loading_from_pretrained as loading
    from tests.loading.test_loading_from_pretrained import REPO, assert_same_fields

    monkeypatch.chdir(REPO)  # TL's fixture took the folder's path relative to the repository
    case = MOE_CONFIGS[family]
    for expected in (case["from_folder"], case["from_cache"]):
        # TL keeps the config's window as an inert window_size (use_local_attn=False);
        # interp's config refuses a window without local layers, so it has none.
        assert not expected["use_local_attn"] and expected.pop("window_size") == 8
    assert_same_fields(loading.get_pretrained_model_config(case["local_path"]), case["from_folder"])
    hub_cache.add(case["official_name"], {"config.json": REPO / case["local_path"] / "config.json"})
    assert_same_fields(
        loading.get_pretrained_model_config(case["official_name"]), case["from_cache"]
    )


def test_moe_hooks_equal_transformer_lens():
    """TransformerLens 2.18's MoE on the same tiny Mixtral (fixture written by
    tests/tl218_reference/make_moe_hooks.py): equal logits, the same experts for every token,
    and each expert's hook_gate/hook_pre/hook_post rows in TransformerLens's order (TL
    flattens batch and position in the router's hooks: [batch * pos, ...])."""
    from safetensors.torch import load_file

    reference = Path(__file__).parents[1] / "tl218_reference" / "api"
    tl = load_file(reference / "moe_mixtral_hooks.safetensors")
    model = HookedTransformer.from_pretrained_no_processing(reference / "moe_mixtral")
    with torch.no_grad():
        logits, cache = model.run_with_cache(tl["tokens"])
    torch.testing.assert_close(logits, tl["logits"], **model_tolerance(model.cfg, tl["logits"]))
    k, n_experts = model.cfg.experts_per_token, model.cfg.num_experts
    for name, value in tl.items():
        if name.endswith("hook_expert_indices"):
            assert torch.equal(cache[name].reshape(-1, k), value), name
        elif name.endswith("hook_expert_weights"):
            ours = cache[name].reshape(-1, n_experts)
            torch.testing.assert_close(ours, value, **model_tolerance(model.cfg))
        elif ".experts." in name:
            assert cache[name].shape == value.shape, name
            torch.testing.assert_close(cache[name], value, **model_tolerance(model.cfg, value))


def test_expert_config_fields_are_checked():
    base = dict(
        n_layers=1,
        d_model=16,
        n_ctx=8,
        n_heads=2,
        normalization_type="RMS",
        gated_mlp=True,
        act_fn="silu",
    )
    HookedTransformerConfig(**base, num_experts=4, experts_per_token=4)
    with pytest.raises(ValueError, match="experts_per_token=5 is more than num_experts=4"):
        HookedTransformerConfig(**base, num_experts=4, experts_per_token=5)
    with pytest.raises(ValueError, match="needs both"):
        HookedTransformerConfig(**base, num_experts=4)
    with pytest.raises(ValueError, match="gated_mlp=False"):
        HookedTransformerConfig(**base | dict(gated_mlp=False), num_experts=4, experts_per_token=2)
    with pytest.raises(ValueError, match="d_mlp_shared_expert=8 .* num_experts=None"):
        HookedTransformerConfig(**base, d_mlp_shared_expert=8)
