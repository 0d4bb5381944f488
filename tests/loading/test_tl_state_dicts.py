"""State dicts saved by TransformerLens 2.18 (``tl218_reference/make_state_dicts.py``: its
attention buffers ``mask``, ``IGNORE``, ``rotary_sin``, ``rotary_cos`` included) load with a
strict ``load_state_dict``; ours hold the same keys, shapes and dtypes and round-trip; and
the checks refuse buffers this model cannot honour, before any weight changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformer, HookedTransformerConfig
from interp.components.tl_buffers import MAX_N_CTX, weights_state_dict
from interp.loading.transformer_lens import load_transformer_lens_state_dict
from tests.support.tolerances import model_tolerance, tolerance

HERE = Path(__file__).resolve().parents[1] / "tl218_reference" / "state_dicts"
INDEX = json.loads((HERE / "state_dicts.json").read_text())
MODELS = sorted(INDEX["models"])
TOKENS = torch.tensor(INDEX["tokens"])


def config(name: str) -> HookedTransformerConfig:
    entry = INDEX["models"][name]
    return HookedTransformerConfig(**entry["config"], dtype=getattr(torch, entry["dtype"]))


def tl_state_dict(name: str) -> dict[str, torch.Tensor]:
    return torch.load(HERE / f"{name}.pt", weights_only=True)


def same_weights(a: HookedTransformer, b: HookedTransformer) -> bool:
    first, second = weights_state_dict(a), weights_state_dict(b)
    return first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)


def check_logits(model: HookedTransformer, name: str) -> None:
    expected = load_file(HERE / "logits.safetensors")[f"{name}.logits"]
    with torch.no_grad():
        logits = model(TOKENS).float()
    torch.testing.assert_close(logits, expected, **model_tolerance(model.cfg, expected))


@pytest.mark.parametrize("name", MODELS)
def test_transformer_lens_state_dict_loads_strictly(name):
    model = HookedTransformer(config(name)).eval()
    result = model.load_state_dict(tl_state_dict(name))  # strict=True, as in TransformerLens
    assert not result.missing_keys and not result.unexpected_keys
    check_logits(model, name)
    loaded = load_transformer_lens_state_dict(
        HERE / f"{name}.pt", config(name), model_class=HookedTransformer
    ).eval()
    assert same_weights(loaded, model)


@pytest.mark.parametrize("name", MODELS)
def test_state_dict_has_transformer_lens_keys_shapes_and_dtypes(name):
    model = HookedTransformer(config(name))
    ours = {
        key: [list(tensor.shape), str(tensor.dtype).removeprefix("torch.")]
        for key, tensor in model.state_dict().items()
    }
    theirs = {key: [shape, dtype] for key, shape, dtype in INDEX["models"][name]["state_dict"]}
    assert ours == theirs
    state_dict, reference = model.state_dict(), tl_state_dict(name)
    for key in (k for k in reference if k.endswith((".mask", ".IGNORE"))):
        assert torch.equal(state_dict[key], reference[key]), key
    for key in (k for k in reference if ".rotary_" in k):  # computed the same way, rounded
        within = tolerance(model.cfg.dtype, reduction=2, depth=2)
        torch.testing.assert_close(state_dict[key], reference[key], **within)


@pytest.mark.parametrize("name", MODELS)
def test_state_dict_round_trips(name, tmp_path):
    model = HookedTransformer(config(name)).eval()
    model.load_state_dict(tl_state_dict(name))
    torch.save(model.state_dict(), tmp_path / "saved.pt")
    fresh = HookedTransformer(config(name).to_dict() | {"seed": 123}).eval()
    assert not same_weights(fresh, model)
    result = fresh.load_state_dict(torch.load(tmp_path / "saved.pt", weights_only=True))
    assert not result.missing_keys and not result.unexpected_keys
    assert same_weights(fresh, model)
    check_logits(fresh, name)


def test_a_state_dict_without_the_buffers_still_loads():
    model = HookedTransformer(config("gpt2")).eval()
    reference = tl_state_dict("gpt2")
    weights = {k: v for k, v in reference.items() if not k.endswith((".mask", ".IGNORE"))}
    model.load_state_dict(weights)  # interp's own files and converted weights have none
    check_logits(model, "gpt2")


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda sd: sd.update({"blocks.1.attn.mask": torch.ones(12, 12, dtype=torch.bool)}),
         r"blocks\.1\.attn\.mask is not the causal mask"),
        (lambda sd: sd.update({"blocks.0.attn.mask": torch.ones(12, 6, dtype=torch.bool)}),
         r"blocks\.0\.attn\.mask is \(12, 6\); .* square"),
        (lambda sd: sd.update({"blocks.1.attn.IGNORE": torch.tensor(0.0)}),
         r"blocks\.1\.attn\.IGNORE is 0\.0: masked keys would still be attended to"),
        (lambda sd: sd.update({"blocks.0.attn.rotary_sin": torch.zeros(12, 8)}),
         r"blocks\.0\.attn\.rotary_sin belongs to a rotary model"),
    ],
)  # fmt: skip
def test_buffers_this_model_cannot_honour_are_refused_before_any_weight_changes(change, message):
    model = HookedTransformer(config("gpt2")).eval()
    before = {k: v.clone() for k, v in weights_state_dict(model).items()}
    state_dict = tl_state_dict("gpt2")
    change(state_dict)
    with pytest.raises(ValueError, match=message):
        model.load_state_dict(state_dict)
    after = weights_state_dict(model)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_local_window_mismatch_is_named():
    cfg = config("local_rotary").to_dict() | {"window_size": 5}
    model = HookedTransformer(cfg)
    with pytest.raises(ValueError, match=r"blocks\.0\.attn\.mask is not the causal, window_size=5"):
        model.load_state_dict(tl_state_dict("local_rotary"))


def test_long_contexts_hold_no_buffers_and_weights_state_dict_never_does():
    cfg = config("gpt2").to_dict() | {"n_ctx": MAX_N_CTX + 1}
    long = HookedTransformer(cfg)
    assert not any(k.endswith(".mask") for k in long.state_dict())
    short = HookedTransformer(config("local_rotary"))
    assert "blocks.0.attn.rotary_cos" in short.state_dict()
    weights = weights_state_dict(short)
    buffers = ("mask", "IGNORE", "rotary_sin", "rotary_cos")
    assert not any(key.rsplit(".", 1)[-1] in buffers for key in weights)
    assert set(weights) < set(short.state_dict())


def test_build_model_takes_a_state_dict_with_the_buffers_and_checks_them():
    from interp.loading.checkpoint import CheckpointError, build_model

    reference = tl_state_dict("local_rotary")
    built = build_model(  # as model.state_dict() is
        config("local_rotary"), reference.items(), model_class=HookedTransformer
    )
    model = HookedTransformer(config("local_rotary"))
    model.load_state_dict(reference)
    assert same_weights(built, model)
    reference["blocks.0.attn.mask"] = torch.ones(12, 12, dtype=torch.bool)
    with pytest.raises(CheckpointError, match=r"blocks\.0\.attn\.mask is not the causal"):
        build_model(config("local_rotary"), reference.items(), model_class=HookedTransformer)
