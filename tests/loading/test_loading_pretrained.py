"""from_pretrained with TransformerLens's defaults: its processed model's cache values (against
transformer_lens on the same weights), log-probs unchanged, TL's aliases and arguments, and
clear errors for broken config.json files."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading import pretrained
from interp.loading.checkpoint import CheckpointError
from interp.loading.transformer_lens.model_names import hub_repo_id
from tests.conftest import make_hf_gpt2
from tests.support.tolerances import (
    logits_bound,
    mean_bound,
    model_error_bound,
    model_tolerance,
    within_contract,
)

transformer_lens = pytest.importorskip("transformer_lens")

VOCAB = 1000
TOKENS = torch.randint(0, VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2")
    make_hf_gpt2(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB).save_pretrained(path)
    return path


def test_cache_values_equal_transformer_lens_processed_model(folder):
    """TL's processing through TransformerBridge's compatibility mode (TL 4.x's route to
    HookedTransformer 2.x's from_pretrained defaults) against ours, hook by hook."""
    bridge = transformer_lens.TransformerBridge.boot_transformers(str(folder), tokenizer=None)
    bridge.enable_compatibility_mode(disable_warnings=True)
    model = HookedTransformer.from_pretrained(folder, tokenizer="gpt2").eval()
    assert model.cfg.normalization_type == "LNPre"
    with torch.no_grad():
        tl_logits, tl_cache = bridge.run_with_cache(TOKENS)
        logits, cache = model.run_with_cache(TOKENS)
    torch.testing.assert_close(logits, tl_logits, **model_tolerance(model.cfg, tl_logits))
    shared = sorted(set(cache.keys()) & set(tl_cache.keys()))
    for layer in range(2):
        for name in ("hook_resid_pre", "hook_resid_mid", "hook_resid_post", "attn.hook_pattern"):
            assert f"blocks.{layer}.{name}" in shared
    causal = torch.tril(torch.ones(12, 12, dtype=torch.bool))
    for name in shared:
        ours, theirs = cache[name], tl_cache[name]
        if name.endswith("attn_scores"):  # masked entries may use different fill values
            ours, theirs = ours[..., causal], theirs[..., causal]
        within = model_tolerance(model.cfg, theirs)
        torch.testing.assert_close(ours, theirs, **within, msg=name)


def test_processing_keeps_log_probs_and_no_processing_keeps_weights(folder):
    hf_model = make_hf_gpt2(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB)
    processed = HookedTransformer.from_pretrained(folder)
    raw = HookedTransformer.from_pretrained_no_processing(folder)
    assert raw.cfg.normalization_type == "LN" and raw.b_V.abs().max() > 0
    W_U = processed.W_U
    assert not processed.b_V.any() and W_U.mean(-1).abs().max() <= mean_bound(W_U, -1)
    with torch.no_grad():
        expected = hf_model(TOKENS).logits
        assert (raw(TOKENS) - expected).abs().max() <= logits_bound(raw.cfg, expected)
        log_probs = processed(TOKENS).log_softmax(-1)
        # A log-probability moves by at most twice its logits' error.
        bound = within_contract(1e-4, 2 * model_error_bound(raw.cfg, expected.abs().max()))
        assert (log_probs - expected.log_softmax(-1)).abs().max() <= bound
        assert (processed(TOKENS) - expected).abs().max() > 1e-3  # logits shift: centred W_U
    manual = raw.process_weights_()
    for name, tensor in manual.state_dict().items():
        torch.testing.assert_close(tensor, processed.state_dict()[name], msg=name)


def test_each_flag_can_be_turned_off(folder):
    model = HookedTransformer.from_pretrained(
        folder, fold_ln=False, center_unembed=False, fold_value_biases=False
    )
    assert model.cfg.normalization_type == "LN" and model.b_V.abs().max() > 0
    assert model.W_U.mean(-1).abs().max() > 1e-4
    W_E = model.W_E
    assert W_E.mean(-1).abs().max() <= mean_bound(W_E, -1)  # center_writing_weights stayed on


def test_hf_model_argument_and_device_and_dtype(folder):
    hf_model = make_hf_gpt2(n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB)
    model = HookedTransformer.from_pretrained("gpt2", hf_model=hf_model, dtype="float64")
    from_folder = HookedTransformer.from_pretrained(folder)
    assert model.cfg.dtype == torch.float64 and model.W_E.dtype == torch.float64
    converted = model.state_dict()  # TransformerLens's bool attention masks stay bool
    for name, tensor in from_folder.state_dict().items():
        torch.testing.assert_close(converted[name].to(tensor.dtype), tensor, msg=name)


@pytest.mark.parametrize(
    ("alias", "hub_id"),
    [
        ("gpt2-small", "gpt2"),
        ("GPT2-Small", "gpt2"),
        ("gpt2", "gpt2"),
        ("gpt2-medium", "gpt2-medium"),
        ("gpt2-large", "gpt2-large"),
        ("gpt2-xl", "gpt2-xl"),
        ("distil-gpt2", "distilgpt2"),
        ("gpt2-xs", "distilgpt2"),
        ("someone/tiny-gpt2", "someone/tiny-gpt2"),
    ],
)
def test_transformer_lens_names_resolve_to_hub_ids(alias, hub_id, folder, monkeypatch):
    assert hub_repo_id(alias) == hub_id  # any other hub id is itself
    asked = []
    monkeypatch.setattr(pretrained, "download_from_hub", lambda repo: asked.append(repo) or folder)
    HookedTransformer.from_pretrained(alias)
    assert asked == [hub_id]


@pytest.mark.parametrize(
    ("argument", "value"),
    [("checkpoint_index", 3), ("first_n_layers", 1)],
)
def test_unsupported_transformer_lens_arguments_are_named(folder, argument, value):
    with pytest.raises(ValueError) as error:
        HookedTransformer.from_pretrained(folder, **{argument: value})
    assert str(error.value).startswith(f"from_pretrained({argument}={value!r}) is not supported")


def test_default_prepend_bos_is_applied(folder):
    model = HookedTransformer.from_pretrained(folder, default_prepend_bos=False)
    assert model.cfg.default_prepend_bos is False


def test_model_without_layer_norms_skips_those_steps_with_a_warning(tmp_path):
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_vocab=50, n_ctx=16, normalization_type=None, seed=0
    )
    HookedTransformer(cfg).save(tmp_path)
    raw = HookedTransformer.from_pretrained_no_processing(tmp_path)
    with pytest.warns(UserWarning, match="fold_ln and center_writing_weights cannot apply"):
        processed = HookedTransformer.from_pretrained(tmp_path)
    tokens = TOKENS % 50
    with torch.no_grad():
        logits = raw(tokens)
        difference = processed(tokens).log_softmax(-1) - logits.log_softmax(-1)
    bound = within_contract(1e-4, 2 * model_error_bound(raw.cfg, logits.abs().max()))
    assert difference.abs().max() <= bound
    assert not processed.b_V.any()


def test_gpu_device_without_cuda_is_a_clear_error(folder):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device='cuda' needs CUDA, but CUDA is not available"):
        HookedTransformer.from_pretrained(folder, device="cuda")
    with pytest.raises(ValueError, match="device='gpu' is not a torch device.*'cuda'"):
        HookedTransformer.from_pretrained_no_processing(folder, device="gpu")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("n_embd", "64", "field 'n_embd' (d_model) is '64'; it must be a positive integer"),
        ("n_head", None, "field 'n_head' (the number of heads) is None; it must be a positive"),
        ("n_head", 0, "field 'n_head' (the number of heads) is 0; it must be a positive integer"),
        ("vocab_size", ..., "field 'vocab_size' (the vocabulary size) is missing; it must be"),
        ("torch_dtype", "float33", "field 'torch_dtype' is 'float33', not a torch dtype"),
        ("n_layer", True, "field 'n_layer' (the number of layers) is True; it must be a positive"),
    ],
)
def test_bad_hf_config_names_file_field_and_fix(tmp_path, key, value, message):
    make_hf_gpt2(vocab_size=VOCAB).save_pretrained(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    if value is ...:
        del config[key]
    else:
        config[key] = value
    config_path.write_text(json.dumps(config))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(CheckpointError) as error:
            HookedTransformer.from_pretrained(tmp_path)
    text = str(error.value)
    assert text.startswith(f"{config_path} is not a valid GPT-2 config: {message}")
    assert text.endswith(
        "Fix that field in the file, or save the model again with save_pretrained."
    )


def test_hf_config_that_is_not_json_is_named(tmp_path):
    make_hf_gpt2(vocab_size=VOCAB).save_pretrained(tmp_path)
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="config.json holds a JSON list, not an object"):
        HookedTransformer.from_pretrained(tmp_path)
