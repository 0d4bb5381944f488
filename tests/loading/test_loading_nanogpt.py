"""from_nanogpt on checkpoints in nanoGPT's exact layout, against Hugging Face on the same weights.

The checkpoints are built by converting a random GPT2LMHeadModel to nanoGPT's ``model.py``
names and layout (nn.Linear weights are the transpose of HF's Conv1D; ``lm_head`` is the
same tensor as ``wte``), so HF's logits are an independent computation of the same network.
"""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer
from interp.loading.checkpoint import CheckpointError
from interp.tokenizers import GPT2Tokenizer
from tests.conftest import make_hf_gpt2
from tests.loading.test_loading_hf import RunsCode, tokens
from tests.support.tolerances import logits_bound

LINEAR_WEIGHTS = ("c_attn.weight", "c_proj.weight", "c_fc.weight")


def to_nanogpt(hf_model, bias: bool = True) -> dict[str, torch.Tensor]:
    """``GPT.state_dict()`` of nanoGPT's model.py holding ``hf_model``'s weights."""
    config = hf_model.config
    state_dict = {}
    for name, tensor in hf_model.state_dict().items():
        if name == "lm_head.weight" or (not bias and name.endswith("bias")):
            continue
        state_dict[name] = tensor.T.clone() if name.endswith(LINEAR_WEIGHTS) else tensor.clone()
    for layer in range(config.n_layer):  # the causal-mask buffer nanoGPT keeps without flash
        mask = torch.tril(torch.ones(config.n_positions, config.n_positions))
        state_dict[f"transformer.h.{layer}.attn.bias"] = mask.view(
            1, 1, config.n_positions, config.n_positions
        )
    state_dict["lm_head.weight"] = state_dict["transformer.wte.weight"]  # weight tying
    return state_dict


def model_args(hf_model, bias: bool = True) -> dict:
    config = hf_model.config
    return dict(
        n_layer=config.n_layer,
        n_head=config.n_head,
        n_embd=config.n_embd,
        block_size=config.n_positions,
        bias=bias,
        vocab_size=config.vocab_size,
        dropout=0.0,
    )


def train_py_checkpoint(hf_model, bias: bool = True, prefix: str = "") -> dict:
    """What nanoGPT's train.py saves: model, optimizer state, model_args, iteration, config."""
    state_dict = {prefix + k: v for k, v in to_nanogpt(hf_model, bias).items()}
    moments = {i: {"exp_avg": torch.zeros_like(v)} for i, v in enumerate(state_dict.values())}
    return {
        "model": state_dict,
        "optimizer": {"state": moments, "param_groups": [{"lr": 6e-4, "params": [0]}]},
        "model_args": model_args(hf_model, bias),
        "iter_num": 5000,
        "best_val_loss": torch.tensor(2.9),
        "config": {"dataset": "openwebtext", "compile": True, "dtype": "bfloat16"},
    }


def nanogpt_hf(vocab_size: int = 1000, bias: bool = True, seed: int = 0):
    """A random HF GPT-2 with nanoGPT's numerics (exact GELU); without biases if ``bias=False``."""
    hf_model = make_hf_gpt2(vocab_size=vocab_size, activation_function="gelu", seed=seed)
    if not bias:
        with torch.no_grad():
            for name, param in hf_model.named_parameters():
                if name.endswith("bias"):
                    param.zero_()
    return hf_model


def assert_matches_hf(model, hf_model, vocab_size: int = 1000) -> None:
    with torch.no_grad():
        expected = hf_model(tokens(vocab=vocab_size)).logits
        difference = (model(tokens(vocab=vocab_size)) - expected).abs().max()
        assert difference <= logits_bound(model.cfg, expected)


@pytest.mark.parametrize("prefix", ["", "_orig_mod."])
def test_train_py_checkpoint(tmp_path, prefix):
    hf_model = nanogpt_hf()
    torch.save(train_py_checkpoint(hf_model, prefix=prefix), tmp_path / "ckpt.pt")
    model = HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    assert_matches_hf(model, hf_model)
    assert model.cfg.act_fn == "gelu" and model.cfg.original_architecture == "nanoGPT"
    assert model.tokenizer is None  # a 1000-token vocabulary is not GPT-2's


def test_bias_false(tmp_path):
    hf_model = nanogpt_hf(bias=False)
    checkpoint = train_py_checkpoint(hf_model, bias=False)
    assert not any(key.endswith(("ln_1.bias", "c_fc.bias")) for key in checkpoint["model"])
    torch.save(checkpoint, tmp_path / "ckpt.pt")
    model = HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    assert_matches_hf(model, hf_model)
    for name, param in model.named_parameters():
        if name.split(".")[-1].startswith("b"):
            assert not param.any(), name


def test_vocabulary_padded_to_50304_gets_gpt2_tokenizer(tmp_path):
    hf_model = make_hf_gpt2(
        vocab_size=50304, activation_function="gelu", n_embd=32, n_head=2, n_layer=1
    )
    torch.save(train_py_checkpoint(hf_model), tmp_path / "ckpt.pt")
    model = HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    assert model.cfg.d_vocab == 50304 and isinstance(model.tokenizer, GPT2Tokenizer)
    assert_matches_hf(model, hf_model, vocab_size=50257)
    assert model("Hello world").shape == (1, 3, 50304)


def test_bare_state_dict_needs_n_head(tmp_path):
    hf_model = nanogpt_hf()
    torch.save(to_nanogpt(hf_model), tmp_path / "model.pt")
    with pytest.raises(CheckpointError, match="does not record the number of heads"):
        HookedTransformer.from_nanogpt(tmp_path / "model.pt")
    model = HookedTransformer.from_nanogpt(tmp_path / "model.pt", model_args={"n_head": 4})
    assert_matches_hf(model, hf_model)


def test_in_memory_checkpoint_is_not_aliased():
    hf_model = nanogpt_hf()
    checkpoint = train_py_checkpoint(hf_model)
    model = HookedTransformer.from_nanogpt(checkpoint, dtype=torch.bfloat16)
    assert model.W_E.dtype == torch.bfloat16
    model32 = HookedTransformer.from_nanogpt(checkpoint)
    with torch.no_grad():
        model32.embed.W_E.zero_()
    assert checkpoint["model"]["transformer.wte.weight"].any()


def test_untied_lm_head(tmp_path):
    hf_model = nanogpt_hf()
    hf_model.config.tie_word_embeddings = False
    hf_model.lm_head.weight = torch.nn.Parameter(torch.randn_like(hf_model.lm_head.weight))
    checkpoint = train_py_checkpoint(hf_model)
    checkpoint["model"]["lm_head.weight"] = hf_model.lm_head.weight.detach().clone()
    model = HookedTransformer.from_nanogpt(checkpoint)
    assert_matches_hf(model, hf_model)


def test_wrong_keys_and_shapes_are_named():
    hf_model = nanogpt_hf()
    checkpoint = train_py_checkpoint(hf_model)
    del checkpoint["model"]["transformer.h.1.mlp.c_fc.weight"]
    checkpoint["model"]["transformer.h.0.attn.c_proj.weight"] = torch.zeros(64, 32)
    with pytest.raises(CheckpointError) as error:
        HookedTransformer.from_nanogpt(checkpoint)
    message = str(error.value)
    assert "missing keys ['transformer.h.1.mlp.c_fc.weight']" in message
    assert "transformer.h.0.attn.c_proj.weight: checkpoint (64, 32), model (64, 64)" in message


def test_hugging_face_state_dict_is_refused(tmp_path):
    torch.save({"bert.embeddings.word_embeddings.weight": torch.zeros(3, 2)}, tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="not a nanoGPT checkpoint"):
        HookedTransformer.from_nanogpt(tmp_path / "x.pt")


def test_missing_truncated_and_malicious_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    torch.save(train_py_checkpoint(nanogpt_hf()), tmp_path / "ckpt.pt")
    data = (tmp_path / "ckpt.pt").read_bytes()
    (tmp_path / "ckpt.pt").write_bytes(data[: len(data) // 3])
    with pytest.raises(CheckpointError, match="ckpt.pt is truncated or corrupt"):
        HookedTransformer.from_nanogpt(tmp_path / "ckpt.pt")
    marker = tmp_path / "pwned"
    checkpoint = train_py_checkpoint(nanogpt_hf())
    checkpoint["config"]["callback"] = RunsCode(marker)
    torch.save(checkpoint, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="Refused to load"):
        HookedTransformer.from_nanogpt(tmp_path / "evil.pt")
    assert not marker.exists()
