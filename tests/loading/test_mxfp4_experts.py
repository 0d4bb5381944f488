"""gpt-oss's MXFP4 experts kept in MXFP4 in memory: a tiny gpt-oss checkpoint written as
the published ones are (``*_blocks``/``*_scales``) loads with uint8 experts, and its logits,
every hook and an editing hook equal, bit for bit, those of the same checkpoint dequantized
at load; ``dequantize_experts=True`` and the config's ``quantization_config.dequantize``
give the old path, and ``fold_ln`` (which would rewrite the 4-bit weights) is skipped with
a warning."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from interp import HookedTransformer
from interp.components.mxfp4_experts import MXFP4GptOssExpert, quantized_bytes
from tests.loading.test_families_gpt_oss_parity import quantized_folder
from tests.loading.test_families_parity import tokens

CASE = "gpt-oss-yarn-ramp-window-4"  # 2 layers, 4 experts, 2 a token, d_model 64, d_mlp 32


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt-oss-mxfp4")
    quantized_folder(folder, CASE)
    return folder


@pytest.fixture(scope="module")
def models(folder):
    load = HookedTransformer.from_pretrained_no_processing
    kept = load(folder, tokenizer=None).eval()
    dequantized = load(folder, tokenizer=None, dequantize_experts=True).eval()
    return kept, dequantized


def test_the_experts_stay_uint8_blocks_and_scales(models):
    kept, dequantized = models
    assert kept.cfg.experts_mxfp4 and not dequantized.cfg.experts_mxfp4
    expert = kept.blocks[1].mlp.experts[2]
    assert isinstance(expert, MXFP4GptOssExpert)
    assert expert.W_gate_blocks.dtype == torch.uint8 and expert.W_out_scales.dtype == torch.uint8
    assert expert.W_gate_blocks.shape == (32, 2, 16)  # [d_mlp, d_model / 32, 16]
    assert expert.W_out_blocks.shape == (64, 1, 16)  # [d_model, d_mlp / 32, 16]
    reference = dequantized.blocks[1].mlp.experts[2]
    for name in ("W_gate", "W_in", "W_out"):
        assert torch.equal(getattr(expert, name), getattr(reference, name))
    assert not any("experts" in name and ".W_" in name for name, _ in kept.named_parameters())
    expert_weights = 2 * 4 * 3 * 64 * 32  # layers, experts, weights, values
    assert quantized_bytes(kept) == expert_weights // 2 + expert_weights // 32  # nibbles, scales


def test_logits_and_every_hook_equal_the_dequantized_model_bit_for_bit(models):
    kept, dequantized = models
    with torch.no_grad():
        logits, cache = kept.run_with_cache(tokens())
        expected, expected_cache = dequantized.run_with_cache(tokens())
    assert torch.equal(logits, expected)
    assert set(cache) == set(expected_cache)
    assert "blocks.0.mlp.experts.1.hook_post" in cache
    for name, value in expected_cache.items():
        assert torch.equal(cache[name], value), name


def test_an_editing_hook_on_an_expert_changes_both_alike(models):
    def double(post, hook):
        return post * 2

    hooks = [("blocks.1.mlp.experts.0.hook_post", double)]
    kept, dequantized = models
    with torch.no_grad():
        edited = kept.run_with_hooks(tokens(), fwd_hooks=hooks)
        assert torch.equal(edited, dequantized.run_with_hooks(tokens(), fwd_hooks=hooks))
        assert not torch.equal(edited, kept(tokens()))


def test_bf16_is_bit_equal_too(folder):
    load = HookedTransformer.from_pretrained_no_processing
    kept = load(folder, tokenizer=None, dtype=torch.bfloat16)
    dequantized = load(folder, tokenizer=None, dtype=torch.bfloat16, dequantize_experts=True)
    with torch.no_grad():
        assert torch.equal(kept(tokens()), dequantized(tokens()))


def test_the_config_can_ask_for_dequantized_experts(folder, tmp_path):
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"]["dequantize"] = True
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").symlink_to(folder / "model.safetensors")
    model = HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)
    assert not model.cfg.experts_mxfp4
    config["quantization_config"]["dequantize"] = "yes"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="'quantization_config.dequantize' is 'yes'"):
        HookedTransformer.from_pretrained_no_processing(tmp_path, tokenizer=None)


def test_from_pretrained_skips_fold_ln_on_kept_experts_and_folds_dequantized_ones(folder):
    with pytest.warns(UserWarning, match="fold_ln cannot fold ln2 into experts kept in MXFP4"):
        kept = HookedTransformer.from_pretrained(folder, tokenizer=None)
    assert kept.cfg.normalization_type == "RMS"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        folded = HookedTransformer.from_pretrained(folder, tokenizer=None, dequantize_experts=True)
    assert not any("fold_ln" in str(warning.message) for warning in caught)
    assert folded.cfg.normalization_type == "RMSPre"
    with torch.no_grad():
        torch.testing.assert_close(
            kept(tokens()).log_softmax(-1), folded(tokens()).log_softmax(-1), atol=1e-4, rtol=0
        )


def test_saved_and_loaded_again_the_experts_stay_mxfp4(models, tmp_path):
    kept, _ = models
    again = HookedTransformer.from_pretrained_no_processing(kept.save(tmp_path))
    assert again.cfg.experts_mxfp4
    assert again.blocks[0].mlp.experts[0].W_in_blocks.dtype == torch.uint8
    with torch.no_grad():
        assert torch.equal(again(tokens()), kept(tokens()))


def test_experts_no_token_chose_dequantize_nothing_and_hook_empty_rows(models, monkeypatch):
    """Every token routed to experts 0 and 1: experts 2 and 3 see [0, d_mlp] in their hooks,
    as in the dequantized model, without dequantizing a weight."""
    from interp.components import mxfp4_experts

    def first_two(indices, hook):
        return torch.stack(
            [torch.zeros_like(indices[..., 0]), torch.ones_like(indices[..., 0])], -1
        )

    hooks = [(f"blocks.{layer}.mlp.hook_expert_indices", first_two) for layer in (0, 1)]
    kept, dequantized = models
    calls = []
    original = mxfp4_experts.dequantize_rows
    monkeypatch.setattr(
        mxfp4_experts, "dequantize_rows", lambda *args: calls.append(1) or original(*args)
    )
    names = lambda name: "experts.3.hook_post" in name or name.endswith("hook_resid_post")  # noqa: E731
    with torch.no_grad(), kept.hooks(fwd_hooks=hooks), dequantized.hooks(fwd_hooks=hooks):
        logits, cache = kept.run_with_cache(tokens(), names_filter=names)
        expected, expected_cache = dequantized.run_with_cache(tokens(), names_filter=names)
    assert len(calls) == 2 * 2 * 3  # layers, chosen experts, weights
    assert cache["blocks.1.mlp.experts.3.hook_post"].shape == (0, 32)
    assert torch.equal(logits, expected)
    assert all(torch.equal(cache[name], expected_cache[name]) for name in expected_cache)
