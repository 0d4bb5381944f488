"""Tests for interp/loading/native.py: save -> load round-trips bit-exactly."""

import json

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig, get_tokenizer
from interp.loading.native import is_native_folder, load_native, save_native
from interp.tokenizers import CharTokenizer


def tiny_model(dtype=torch.float32, attn_only=False, tokenizer=None, **overrides):
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_vocab=tokenizer.vocab_size if tokenizer else 60,
        n_ctx=16,
        attn_only=attn_only,
        dtype=dtype,
        seed=3,
        **overrides,
    )
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    with torch.no_grad():  # non-trivial biases and norms, so every tensor is checked
        for param in model.parameters():
            param.add_(torch.randn(param.shape, dtype=torch.float32).to(dtype) * 0.1)
    return model


def assert_same_weights(a: HookedTransformer, b: HookedTransformer) -> None:
    sd_a, sd_b = a.state_dict(), b.state_dict()
    assert sd_a.keys() == sd_b.keys()
    for name in sd_a:
        assert sd_a[name].dtype == sd_b[name].dtype, name
        assert torch.equal(sd_a[name], sd_b[name]), name


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
def test_round_trip_is_bit_exact_dtype_included(tmp_path, dtype):
    model = tiny_model(dtype)
    model.save(tmp_path / "ckpt")
    loaded = load_native(tmp_path / "ckpt")
    assert loaded.cfg.dtype == dtype
    assert_same_weights(model, loaded)
    assert loaded.cfg.to_dict() == model.cfg.to_dict()
    tokens = torch.randint(0, 60, (2, 10))
    assert torch.equal(model(tokens), loaded(tokens))


def test_attn_only_and_extra_round_trip(tmp_path):
    model = tiny_model(attn_only=True, normalization_type=None, extra={"val_loss": 1.25})
    save_native(model, tmp_path)
    loaded = load_native(tmp_path)
    assert loaded.cfg.attn_only and loaded.cfg.normalization_type is None
    assert loaded.cfg.extra == {"val_loss": 1.25}
    assert_same_weights(model, loaded)


def test_char_tokenizer_is_saved(tmp_path):
    tokenizer = CharTokenizer("\n !,.:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
    model = tiny_model(tokenizer=tokenizer, default_prepend_bos=False)
    model.save(tmp_path)
    loaded = load_native(tmp_path)
    assert isinstance(loaded.tokenizer, CharTokenizer)
    assert loaded.tokenizer.chars == tokenizer.chars
    assert loaded.to_str_tokens("To be") == ["T", "o", " ", "b", "e"]
    assert loaded.to_string(loaded.to_tokens("ROMEO:\n")) == ["ROMEO:\n"]


def test_gpt2_tokenizer_is_saved_and_other_tokenizers_are_not(tmp_path):
    model = tiny_model(tokenizer=get_tokenizer("gpt2"))
    model.save(tmp_path / "gpt2")
    assert load_native(tmp_path / "gpt2").to_str_tokens("Hello world") == [
        "<|endoftext|>",
        "Hello",
        " world",
    ]
    tiny_model().save(tmp_path / "none")
    assert load_native(tmp_path / "none").tokenizer is None


def test_dtype_and_device_overrides(tmp_path):
    model = tiny_model(torch.float32)
    model.save(tmp_path)
    loaded = load_native(tmp_path, device="cpu", dtype="bfloat16")
    assert loaded.cfg.dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for p in loaded.parameters())
    assert all(p.device.type == "cpu" for p in loaded.parameters())
    expected = model.embed.W_E.to(torch.bfloat16)
    assert torch.equal(loaded.embed.W_E, expected)


def test_config_json_is_the_config_dict_plus_tokenizer(tmp_path):
    model = tiny_model()
    model.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    tokenizer_and_format = {"tokenizer": None, "interp_format": 1}
    assert config == {**model.cfg.to_dict(), **tokenizer_and_format}
    assert is_native_folder(tmp_path)


def test_hugging_face_folder_is_not_native(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert not is_native_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="save_native"):
        load_native(tmp_path)


def test_missing_weight_is_named(tmp_path):
    from safetensors.torch import load_file, save_file

    model = tiny_model()
    model.save(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    del weights["blocks.1.attn.W_Q"]
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match="blocks.1.attn.W_Q"):
        load_native(tmp_path)
