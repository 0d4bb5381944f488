"""Tests for interp/loading/native.py: save -> load round-trips bit-exactly."""

import json
import os

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig, get_tokenizer
from interp.loading.checkpoint import CheckpointError
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
    fields = {**model.cfg.to_dict(), "dtype": "float32"}
    del fields["device"]
    assert config == {**fields, **tokenizer_and_format}
    assert is_native_folder(tmp_path)


def test_hugging_face_folder_is_not_native(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_embd": 32}))
    (tmp_path / "model.safetensors").write_bytes(b"")
    assert not is_native_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="no .interp_format. key.*use from_pretrained"):
        load_native(tmp_path)


def test_missing_weight_is_named(tmp_path):
    from safetensors.torch import load_file, save_file

    model = tiny_model()
    model.save(tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    del weights["blocks.1.attn.W_Q"]
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(CheckpointError, match=r"missing keys \['blocks.1.attn.W_Q'\]"):
        load_native(tmp_path)


def test_truncated_weights_name_the_file(tmp_path):
    tiny_model().save(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-100])
    with pytest.raises(CheckpointError) as error:
        load_native(tmp_path)
    assert f"{weights} is truncated: tensor" in str(error.value)
    assert "Download or copy it again" in str(error.value)


def test_random_bytes_weights_name_the_file(tmp_path):
    tiny_model().save(tmp_path)
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(os.urandom(4000))
    with pytest.raises(CheckpointError) as error:
        load_native(tmp_path)
    assert str(error.value).startswith(
        f"{weights} is not a valid safetensors file (truncated or corrupt)"
    )


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("n_layers", "2", "n_layers must be given, as a positive integer, got '2' (str)"),
        ("d_model", None, "d_model must be given, as a positive integer, got None (NoneType)"),
        ("n_heads", 0, "n_heads must be positive, got 0."),
        ("dtype", "float33", "dtype='float33' is not a torch dtype; use e.g. 'float32'"),
        ("attn_only", "no", "attn_only must be True or False, got 'no' (str)."),
        ("d_vocab", 2.5, "d_vocab must be a positive integer, got 2.5 (float)"),
    ],
)
def test_bad_config_field_names_file_field_and_fix(tmp_path, key, value, message):
    model = tiny_model()
    model.save(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config[key] = value
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(CheckpointError) as error:
        load_native(tmp_path)
    text = str(error.value)
    assert text.startswith(f"{tmp_path / 'config.json'} is not a valid config: ")
    assert message in text
    assert text.endswith("Fix that field in the file, or save the model again.")


def test_missing_config_field_and_broken_json_are_named(tmp_path):
    tiny_model().save(tmp_path)
    config_path = tmp_path / "config.json"
    config = json.loads(config_path.read_text())
    del config["n_ctx"]
    config_path.write_text(json.dumps(config))
    with pytest.raises(CheckpointError, match=r"The config has no \['n_ctx'\]; these fields"):
        load_native(tmp_path)
    config_path.write_text('{"n_layers": 2,')
    with pytest.raises(CheckpointError, match=f"{config_path} is not valid JSON"):
        load_native(tmp_path)


def test_control_characters_in_a_path_are_escaped(tmp_path):
    folder = tmp_path / "evil\x1b[2Jname"
    tiny_model().save(folder)
    (folder / "model.safetensors").write_bytes(b"\x00" * 3)
    with pytest.raises(CheckpointError) as error:
        load_native(folder)
    assert "\x1b" not in str(error.value)
    assert "evil\\x1b[2Jname" in str(error.value)


def test_gpu_device_without_cuda_is_a_clear_error(tmp_path):
    tiny_model().save(tmp_path)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="device='cuda' needs CUDA, but CUDA is not available"):
        load_native(tmp_path, device="cuda")
    with pytest.raises(ValueError, match="device='gpu' is not a torch device.*did you mean 'cuda'"):
        load_native(tmp_path, device="gpu")
