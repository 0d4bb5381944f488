"""TransformerLens's toy models (``attn-only-2l``, ``gelu-1l``, ``solu-1l``, the old Pile
``solu-1l-pile``, ...) through ``HookedTransformer.from_pretrained``: tiny random checkpoints
that TransformerLens 2.18 built with those models' configs, shrunk (written by
tests/tl218_reference/make_api.py as the hub repos hold them: TL's config.json and
``model_final.pth``), loaded offline from the hub cache and from a local folder, give TL's
hook names, logits and cache, with and without TL's weight processing."""

from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformer
from interp import loading_from_pretrained as loading
from interp.loading.checkpoint import CheckpointError
from tests.support.hub_cache import hub_cache  # noqa: F401 (a fixture)

API = Path(__file__).parents[1] / "tl218_reference" / "api"
TOY = json.loads((API / "toy.json").read_text())
OUTPUTS = load_file(API / "toy_outputs.safetensors")
TOKENS = OUTPUTS["tokens"]
# Hook points TL 2.18 always has but interp adds only when asked (use_attn_result, ...), and
# two it defines but never runs: the shortformer attention's hook_attn_input and an
# attention-only block's hook_mlp_out.
TL_ONLY = ("attn.hook_result", "hook_attn_in", "hook_q_input", "hook_k_input", "hook_v_input",
           "hook_mlp_in", "attn.hook_attn_input")  # fmt: skip


def tolerance(expected: torch.Tensor, name: str) -> float:
    """float32 rounding over the largest reduction (d_mlp = 128), relative to the values."""
    d_mlp = TOY[name]["config"]["d_mlp"]
    return 16 * torch.finfo(torch.float32).eps * math.sqrt(d_mlp) * max(1.0, expected.abs().max())


def cache_repo(hub_cache, name: str) -> None:  # noqa: F811
    files = {file: API / "toy" / name / file for file in ("config.json", "model_final.pth")}
    hub_cache.add(TOY[name]["repo"], files)


def load(how: str, name: str) -> HookedTransformer:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TL's skipped steps (shortformer), said elsewhere
        if how == "processed":
            return HookedTransformer.from_pretrained(name).eval()
        return HookedTransformer.from_pretrained_no_processing(name).eval()


@pytest.mark.parametrize("how", ["raw", "processed"])
@pytest.mark.parametrize("name", sorted(TOY))
def test_toy_model_from_the_hub_cache_gives_transformer_lens_logits(name, how, hub_cache):  # noqa: F811
    cache_repo(hub_cache, name)
    model = load(how, name)
    assert model.cfg.positional_embedding_type == TOY[name]["config"]["positional_embedding_type"]
    assert model.cfg.act_fn == TOY[name]["config"]["act_fn"]
    assert model.cfg.normalization_type == TOY[name][f"{how}_config"]["normalization_type"]
    ours = set(model.hook_dict)
    theirs = set(TOY[name][f"{how}_hook_names"])
    tl_only = TL_ONLY + (("hook_mlp_out",) if model.cfg.attn_only else ())
    assert ours <= theirs and all(hook.endswith(tl_only) for hook in theirs - ours)
    with torch.no_grad():
        logits, cache = model.run_with_cache(TOKENS)
    expected = OUTPUTS[f"{name}/{how}/logits"]
    torch.testing.assert_close(logits, expected, atol=tolerance(expected, name), rtol=0)
    if how == "raw":
        return
    prefix = f"{name}/processed/cache/"
    tl_cache = {key.removeprefix(prefix): value for key, value in OUTPUTS.items()
                if key.startswith(prefix)}  # fmt: skip
    assert sorted(cache.keys()) == sorted(tl_cache)
    causal = torch.tril(torch.ones(TOKENS.shape[1], TOKENS.shape[1], dtype=torch.bool))
    for key, value in tl_cache.items():
        mine = cache[key]
        if key.endswith("attn_scores"):  # masked entries: each library's own fill value
            mine, value = mine[..., causal], value[..., causal]
        torch.testing.assert_close(mine, value, atol=tolerance(value, name), rtol=0, msg=key)


@pytest.mark.parametrize("alias", ["attn-only-2l", "NeelNanda/Attn_Only_2L512W_C4_Code",
                                   "Attn-Only-2L-C4-Code", "attn-only-2l-new"])  # fmt: skip
def test_toy_model_by_any_of_its_names(alias, hub_cache):  # noqa: F811
    cache_repo(hub_cache, "attn-only-2l")
    model = load("raw", alias)
    assert model.cfg.model_name == "Attn_Only_2L512W_C4_Code" and model.cfg.attn_only
    expected = OUTPUTS["attn-only-2l/raw/logits"]
    torch.testing.assert_close(
        model(TOKENS), expected, atol=tolerance(expected, "attn-only-2l"), rtol=0
    )


def test_shortformer_model_skips_transformer_lens_steps_with_a_warning(hub_cache):  # noqa: F811
    cache_repo(hub_cache, "solu-1l")
    with pytest.warns(UserWarning, match="shortformer"):
        model = HookedTransformer.from_pretrained("solu-1l")
    assert model.cfg.normalization_type == "LN"  # fold_ln skipped, as TL does


@pytest.mark.parametrize("name", ["gelu-1l", "solu-1l"])
def test_toy_model_from_a_local_folder(name, tmp_path):
    folder = tmp_path / name
    shutil.copytree(API / "toy" / name, folder)
    model = load("processed", str(folder))
    expected = OUTPUTS[f"{name}/processed/logits"]
    torch.testing.assert_close(model(TOKENS), expected, atol=tolerance(expected, name), rtol=0)


def test_state_dict_is_the_checkpoints_and_old_solu_is_converted(hub_cache):  # noqa: F811
    cache_repo(hub_cache, "gelu-1l")
    cache_repo(hub_cache, "solu-1l-pile")
    state_dict = loading.get_pretrained_state_dict("gelu-1l", cfg=None)
    saved = torch.load(API / "toy/gelu-1l/model_final.pth", weights_only=True)
    weights = {k: v for k, v in saved.items() if not k.endswith(("attn.mask", "attn.IGNORE"))}
    assert sorted(state_dict) == sorted(weights)
    for key, value in weights.items():
        torch.testing.assert_close(state_dict[key], value, atol=0, rtol=0, msg=key)
    old = torch.load(API / "toy/solu-1l-pile/model_final.pth", weights_only=True)
    converted = loading.get_pretrained_state_dict("solu-1l-old", cfg=None)
    torch.testing.assert_close(converted["ln_final.w"], old["norm.w"], atol=0, rtol=0)
    torch.testing.assert_close(converted["blocks.0.attn.W_Q"], old["blocks.0.attn.W_Q"].mT)
    torch.testing.assert_close(converted["pos_embed.W_pos"], old["pos_embed.W_pos"].T)


def test_missing_biases_are_zeros_with_a_warning_as_transformer_lens_fills_them(tmp_path):
    folder = tmp_path / "gelu-1l"
    shutil.copytree(API / "toy" / "gelu-1l", folder)
    state_dict = torch.load(folder / "model_final.pth", weights_only=True)
    full = HookedTransformer.from_pretrained_no_processing(folder)
    for name in ("unembed.b_U", "blocks.0.mlp.b_in"):
        del state_dict[name]
    torch.save(state_dict, folder / "model_final.pth")
    with pytest.warns(UserWarning, match=r"has no \['blocks.0.mlp.b_in', 'unembed.b_U'\]"):
        model = HookedTransformer.from_pretrained_no_processing(folder)
    assert not model.b_U.any() and not model.blocks[0].mlp.b_in.any()
    with torch.no_grad():
        full.b_U.zero_()
        full.blocks[0].mlp.b_in.zero_()
        torch.testing.assert_close(model(TOKENS), full(TOKENS), atol=0, rtol=0)
    del state_dict["blocks.0.mlp.W_in"]  # a missing weight is an error, not a guess
    torch.save(state_dict, folder / "model_final.pth")
    with (
        pytest.raises(CheckpointError, match="missing keys.*blocks.0.mlp.W_in"),
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")
        HookedTransformer.from_pretrained_no_processing(folder)


def test_tokenizer_not_in_the_cache_is_a_warning_and_no_tokenizer(tmp_path):
    folder = tmp_path / "gelu-1l"
    shutil.copytree(API / "toy" / "gelu-1l", folder)
    config = json.loads((folder / "config.json").read_text())
    config["tokenizer_name"] = "NeelNanda/gpt-neox-tokenizer-digits"  # the real models' own
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match="tokenizer 'NeelNanda/gpt-neox-tokenizer-digits' could"):
        model = HookedTransformer.from_pretrained_no_processing(folder)
    assert model.tokenizer is None and model.cfg.tokenizer_name == config["tokenizer_name"]


def test_folder_without_weights_and_config_without_fields_are_named(tmp_path):
    folder = tmp_path / "toy"
    shutil.copytree(API / "toy" / "gelu-1l", folder)
    (folder / "model_final.pth").unlink()
    with pytest.raises(FileNotFoundError, match="no .pth file.*one state dict named"):
        HookedTransformer.from_pretrained_no_processing(folder)
    shutil.copy(API / "toy" / "gelu-1l" / "model_final.pth", folder)
    config = json.loads((folder / "config.json").read_text())
    del config["d_head"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match="has no field 'd_head'"):
        HookedTransformer.from_pretrained_no_processing(folder)


def test_toy_model_not_cached_names_the_fix(hub_cache):  # noqa: F811
    with pytest.raises(FileNotFoundError, match="Attn_Only_1L512W_C4_Code.*model_final.pth"):
        HookedTransformer.from_pretrained("attn-only-1l")
