"""The transcoders shipped for shakespeare-char: they load offline by name (alone and with
ReplacementModel.from_pretrained), are circuit-tracer's files, read the tensors they were
trained on, and the card's quick figures are what the weights give."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

import interp
from interp.circuits import ReplacementModel, TranscoderSet, load_transcoders
from interp.circuits.train_transcoders import HARVEST_HOOKS, SHIPPED_NAME, quick_figures
from interp.circuits.transcoders import list_transcoders

FOLDER = Path(str(resources.files("interp.models"))) / "transcoders" / SHIPPED_NAME
RECORD = json.loads((FOLDER / "training.json").read_text())


def test_listed_and_loaded_by_name():
    assert SHIPPED_NAME in list_transcoders()
    transcoders = load_transcoders(SHIPPED_NAME)
    assert isinstance(transcoders, TranscoderSet)
    assert transcoders.n_layers == 4 and transcoders.skip_connection
    assert transcoders.d_transcoder == RECORD["recipe"]["expansion"] * 128
    assert (transcoders.feature_input_hook, transcoders.feature_output_hook) == (
        "mlp.hook_in",
        "mlp.hook_out",
    )
    assert all(t.cfg.architecture == "jumprelu_skip_transcoder" for t in transcoders)


def test_files_are_circuit_tracers():
    names = sorted(p.name for p in FOLDER.iterdir())
    assert names == [
        "MODEL_CARD.md", "config.yaml", "layer_0.safetensors", "layer_1.safetensors",
        "layer_2.safetensors", "layer_3.safetensors", "training.json",
    ]  # fmt: skip
    d_tc = RECORD["recipe"]["expansion"] * 128
    with safe_open(str(FOLDER / "layer_0.safetensors"), framework="pt") as layer:
        shapes = {key: tuple(layer.get_slice(key).get_shape()) for key in layer.keys()}
    assert shapes == {
        "W_enc": (d_tc, 128),
        "W_dec": (d_tc, 128),
        "b_enc": (d_tc,),
        "b_dec": (128,),
        "activation_function.threshold": (d_tc,),
        "W_skip": (128, 128),
    }
    assert sum(p.stat().st_size for p in FOLDER.glob("*.safetensors")) < 6_000_000


def test_reads_the_tensors_it_was_trained_on():
    """mlp.hook_in / mlp.hook_out (what the set names) are ln2.hook_normalized /
    hook_mlp_out (what was harvested), and the features are the shipped JumpReLU's."""
    replacement = ReplacementModel.from_pretrained("shakespeare-char", SHIPPED_NAME)
    tokens = replacement.to_tokens("ROMEO:\nBut soft, what light")
    names = [f"blocks.{layer}.{hook}" for layer in range(4) for hook in HARVEST_HOOKS]
    _, cache = replacement.model.run_with_cache(tokens, names_filter=names)
    with replacement.linearized() as run:
        replacement.run_linearized(tokens)
    for layer in range(4):
        x, y = (cache[f"blocks.{layer}.{hook}"] for hook in HARVEST_HOOKS)
        # the frozen run's attention takes another kernel: float rounding apart
        torch.testing.assert_close(run.inputs[layer], x, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(run.output_values[layer], y, rtol=1e-5, atol=1e-5)
        acts = replacement.transcoders.encode(layer, x)
        threshold = replacement.transcoders[layer].threshold
        assert bool(((acts > 0) == (acts > threshold)).all())


def card_row(label: str) -> list[float]:
    card = (FOLDER / "MODEL_CARD.md").read_text()
    row = next(line for line in card.splitlines() if line.startswith(f"| {label}"))
    return [float(value) for value in re.findall(r"\*\*(-?[\d.]+)", row)]


def test_card_agrees_with_the_training_record():
    figures = RECORD["figures"]
    for layer, expected in enumerate(figures["layers"]):
        explained, l0 = card_row(f"{layer} |")
        assert explained == round(expected["explained_variance"], 4)
        assert l0 == round(expected["l0"], 1)
        assert expected["explained_variance"] > 0.8 and expected["dead_fraction"] < 0.01
    assert card_row("**loss added") == [round(figures["ce_loss_added"], 4)]
    assert card_row("**replacement score") == [round(figures["replacement_score"], 4)]
    assert card_row("**completeness score") == [round(figures["completeness_score"], 4)]


def test_card_figures_are_what_the_weights_give():
    quick = RECORD["figures_quick"]
    figures = quick_figures()
    for got, want in zip(figures["layers"], quick["layers"], strict=True):
        for key in ("explained_variance", "skip_explained_variance", "l0", "dead_fraction"):
            assert got[key] == pytest.approx(want[key], abs=1e-5), key
    for key in ("ce_loss_clean", "ce_loss_replaced", "replacement_score", "completeness_score"):
        assert figures[key] == pytest.approx(quick[key], abs=1e-4), key


def test_model_unchanged_by_loading():
    model = interp.load_model("shakespeare-char")
    tokens = model.to_tokens("KING:\n")
    before = model(tokens)
    replacement = ReplacementModel.from_model(model, SHIPPED_NAME)
    assert replacement.model is model
    torch.testing.assert_close(model(tokens), before, rtol=0, atol=0)
