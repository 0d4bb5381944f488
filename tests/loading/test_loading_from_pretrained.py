"""``interp.loading_from_pretrained`` against TransformerLens 2.18 (fixtures written by
tests/tl218_reference/make_api.py): its model names and aliases, and
``get_pretrained_model_config`` field for field, offline, from local folders and from the hub
cache, for GPT-2, Pythia (GPT-NeoX), Llama, Mistral, Qwen 2, Qwen 3, Gemma 2/3 and the toy
models."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

import interp
from interp import HookedTransformerConfig
from interp import loading_from_pretrained as loading
from interp.utils import get_device
from tests.support.hub_cache import hub_cache  # noqa: F401 (a fixture)

REPO = Path(__file__).parents[2]
API = REPO / "tests" / "tl218_reference" / "api"
NAMES = json.loads((API / "names.json").read_text())
CONFIGS = json.loads((API / "configs.json").read_text())
TOY = json.loads((API / "toy.json").read_text())
FOLDER_FAMILIES = [family for family, case in CONFIGS.items() if "local_path" in case]
# TL 2.18 configures Llama names by name alone (its tables), not from the file.
CACHED_FAMILIES = [family for family in FOLDER_FAMILIES if family != "meta"]
BY_NAME = [name for name, case in CONFIGS.items() if "by_name" in case]
# The families interp loads, as prefixes of TL's official names.
SUPPORTED = ("gpt2", "distilgpt2", "EleutherAI/pythia", "EleutherAI/gpt-neox", "NeelNanda/",
             "ArthurConmy/", "meta-llama/", "codellama/", "mistralai/Mistral-",
             "Qwen/Qwen1.5", "Qwen/Qwen2", "Qwen/Qwen3", "Qwen/QwQ", "google/gemma-2-",
             "google/gemma-3-", "facebook/opt-", "EleutherAI/gpt-neo-", "EleutherAI/gpt-j-",
             "roneneldan/TinyStories-", "microsoft/phi-1", "microsoft/phi-2", "microsoft/Phi-3",
             "microsoft/phi-4", "google/gemma-2b", "google/gemma-7b",
             "bigscience/bloom-", "openai/gpt-oss-", "mistralai/Mixtral-")  # fmt: skip


def assert_same_fields(cfg: HookedTransformerConfig, expected: dict) -> None:
    """Every field TL 2.18 set equals ours. TL pads Gemma 2's attn_types past n_layers (only
    the first n_layers are read); TL's default device is the best one here, as ours; an
    attention-only config keeps TL's d_mlp there but not in interp (its MLP width is None)."""
    ours = cfg.to_dict()
    assert isinstance(cfg, HookedTransformerConfig)
    for name, value in expected.items():
        assert name in ours, f"interp's config has no field {name!r}"
        if name == "dtype":
            assert str(ours[name]) == f"torch.{value}"
        elif name == "device":
            assert ours[name] == get_device()
        elif name == "d_mlp" and cfg.attn_only:
            assert ours[name] is None
        elif name == "attn_types" and value is not None:
            assert ours[name] == value[: cfg.n_layers]
        else:
            assert ours[name] == value, f"{name}: ours {ours[name]!r}, TL {value!r}"


# ------------------------------------------------------------------------------- names
def test_every_name_is_transformer_lens_2_18s_with_its_aliases():
    tl_aliases = NAMES["MODEL_ALIASES"]
    for name in loading.OFFICIAL_MODEL_NAMES:
        assert name in NAMES["OFFICIAL_MODEL_NAMES"]
        assert loading.MODEL_ALIASES[name] == tl_aliases.get(name, []), name
    supported = [n for n in NAMES["OFFICIAL_MODEL_NAMES"] if n.startswith(SUPPORTED)]
    assert "NeelNanda/Attn_Only_1L512W_C4_Code" in supported and "gpt2" in supported
    assert sorted(supported) == sorted(loading.OFFICIAL_MODEL_NAMES)
    assert loading.DEFAULT_MODEL_ALIASES[:2] == ["gpt2-small", "gpt2-medium"]


def test_every_alias_resolves_as_transformer_lens_resolves_it():
    tl_map = {}  # TL's make_model_alias_map, from its tables
    for official in NAMES["OFFICIAL_MODEL_NAMES"]:
        for alias in NAMES["MODEL_ALIASES"].get(official, []):
            tl_map[alias.lower()] = official
        tl_map[official.lower()] = official
    ours = loading.make_model_alias_map()
    for alias, official in ours.items():
        assert tl_map[alias] == official
        assert loading.get_official_model_name(alias.upper()) == official
    for alias in ["attn-only-1l", "gelu-4l", "solu-12l", "solu-8l-pile", "attn-only-demo"]:
        assert loading.get_official_model_name(alias).startswith("NeelNanda/")
    assert loading.get_official_model_name("NeelNanda/Attn_Only_1L512W_C4_Code") == (
        "NeelNanda/Attn_Only_1L512W_C4_Code"
    )


def test_unknown_name_is_transformer_lens_value_error():
    with pytest.raises(ValueError, match=r"^gpt5 not found\. Valid official model names"):
        loading.get_official_model_name("gpt5")


def test_module_is_reachable_as_transformer_lens_names_it():
    assert interp.loading_from_pretrained is loading
    from interp.loading_from_pretrained import get_pretrained_model_config  # noqa: F401


# --------------------------------------------------------------------------- configs
@pytest.mark.parametrize("family", FOLDER_FAMILIES)
def test_config_from_a_local_folder_equals_transformer_lens(family, monkeypatch):
    monkeypatch.chdir(REPO)  # TL's fixture took the folder's path relative to the repository
    case = CONFIGS[family]
    assert_same_fields(loading.get_pretrained_model_config(case["local_path"]), case["from_folder"])


@pytest.mark.parametrize("family", FOLDER_FAMILIES)
def test_config_json_written_by_this_transformers_gives_the_same_fields(family, tmp_path):
    """The fixtures' files are transformers 4.57's; transformers 5 writes rope_parameters and
    partial_rotary_factor instead of rope_theta and rotary_pct, and no GPT-2 n_ctx."""
    transformers = pytest.importorskip("transformers")
    case = CONFIGS[family]
    values = json.loads((REPO / case["local_path"] / "config.json").read_text())
    config_class = type(transformers.AutoConfig.for_model(values.pop("model_type")))
    values.pop("transformers_version")
    for name in ("bos_token_id", "eos_token_id"):  # GPT-2's 50256, beyond the tiny vocabulary
        values.pop(name, None)
    config_class(**values).save_pretrained(tmp_path)
    expected = dict(case["from_folder"])
    for name in ("model_name", "tokenizer_name"):  # the folder's name and path
        expected.pop(name)
    assert_same_fields(loading.get_pretrained_model_config(str(tmp_path)), expected)


@pytest.mark.parametrize("family", CACHED_FAMILIES)
def test_config_from_the_hub_cache_offline_equals_transformer_lens(family, hub_cache):  # noqa: F811
    case = CONFIGS[family]
    hub_cache.add(case["official_name"], {"config.json": REPO / case["local_path"] / "config.json"})
    assert_same_fields(
        loading.get_pretrained_model_config(case["official_name"]), case["from_cache"]
    )
    options = dict(fold_ln=True, n_ctx=32, default_prepend_bos=False, dtype=torch.bfloat16)
    cfg = loading.get_pretrained_model_config(case["official_name"], first_n_layers=1, **options)
    assert_same_fields(cfg, case["from_cache_with_options"])


@pytest.mark.parametrize("name", BY_NAME)
def test_named_models_config_equals_transformer_lens_table(name, hub_cache):  # noqa: F811
    """TL 2.18 configures Llama 3 and Gemma by name (tables of their published configs);
    interp reads the published config.json and gets the same fields (TL's n_ctx caps too)."""
    case = CONFIGS[name]
    hub_cache.add(name, {"config.json": REPO / case["published_config"]})
    assert_same_fields(loading.get_pretrained_model_config(name), case["by_name"])


@pytest.mark.parametrize("name", sorted(TOY))
def test_toy_model_config_equals_transformer_lens(name, hub_cache):  # noqa: F811
    repo = TOY[name]["repo"]
    hub_cache.add(repo, {"config.json": API / "toy" / name / "config.json"})
    expected = TOY[name]["config"] | {"init_weights": False}  # the fixture then built a model
    assert_same_fields(loading.get_pretrained_model_config(name), expected)
    values = loading.convert_neel_model_config(repo)
    assert values["positional_embedding_type"] == TOY[name]["config"]["positional_embedding_type"]


def test_fold_ln_is_refused_for_shortformer_models_with_a_warning(hub_cache, caplog):  # noqa: F811
    hub_cache.add(
        TOY["attn-only-2l"]["repo"], {"config.json": API / "toy/attn-only-2l/config.json"}
    )
    with caplog.at_level(logging.WARNING):
        cfg = loading.get_pretrained_model_config("attn-only-2l", fold_ln=True)
    assert cfg.normalization_type == "LN" and "shortformer model" in caplog.text


def test_longer_n_ctx_than_the_models_logs_transformer_lens_warning(hub_cache, caplog):  # noqa: F811
    hub_cache.add("gpt2", {"config.json": API / "hf_configs/gpt2/config.json"})
    with caplog.at_level(logging.WARNING):
        assert loading.get_pretrained_model_config("gpt2", n_ctx=32).n_ctx == 32
    assert not caplog.text
    with caplog.at_level(logging.WARNING):
        assert loading.get_pretrained_model_config("gpt2", n_ctx=128).n_ctx == 128
    assert "You are setting n_ctx=128 which is larger than this model's default context " in (
        caplog.text
    )


def test_hf_cfg_gives_the_vocabulary_and_qwen2_rope_base(hub_cache):  # noqa: F811
    hub_cache.add("Qwen/Qwen2-0.5B", {"config.json": API / "hf_configs/qwen2/config.json"})
    cfg = loading.get_pretrained_model_config(
        "qwen2-0.5b", hf_cfg={"vocab_size": 120, "rope_theta": 5000}
    )
    assert (cfg.d_vocab, cfg.rotary_base, cfg.load_in_4bit) == (120, 5000, False)


def test_not_cached_names_the_cache_and_the_fix(hub_cache):  # noqa: F811
    with pytest.raises(FileNotFoundError, match="is not in the Hugging Face cache.*HF_HOME"):
        loading.get_pretrained_model_config("gpt2")


def test_checkpoints_are_a_clear_error(hub_cache):  # noqa: F811
    hub_cache.add("gpt2", {"config.json": API / "hf_configs/gpt2/config.json"})
    with pytest.raises(ValueError, match="training checkpoints are not supported"):
        loading.get_pretrained_model_config("gpt2", checkpoint_index=3)


def test_unsupported_architecture_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": ["MambaForCausalLM"]}))
    with pytest.raises(NotImplementedError, match="MambaForCausalLM is not currently supported"):
        loading.get_pretrained_model_config(str(tmp_path))


def test_missing_field_is_named(tmp_path):
    values = json.loads((API / "hf_configs/neox/config.json").read_text())
    del values["hidden_size"]
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match="GPTNeoXForCausalLM.*has no field 'hidden_size'"):
        loading.get_pretrained_model_config(str(tmp_path))


def test_toy_config_missing_a_field_is_named(tmp_path):
    values = json.loads((API / "toy/gelu-1l/config.json").read_text())
    del values["n_ctx"]
    (tmp_path / "config.json").write_text(json.dumps(values))
    with pytest.raises(ValueError, match="has no field 'n_ctx'; a TransformerLens toy model"):
        loading.get_pretrained_model_config(str(tmp_path))
