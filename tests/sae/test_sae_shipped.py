"""The shipped SAE: loads offline by name, fits its model, its card's figures are recomputed,
and feature attribution ranks features as exact feature patching does."""

import json
import re

import pytest

import interp
from interp.sae import HookedSAETransformer, SAEFormatError
from interp.sae.features import feature_attribution, feature_patch, spearman
from interp.sae.shipped import list_saes, sae_card
from interp.sae.train import QUICK_EVAL_CHARS, sae_figures
from interp.train import default_text, split_text
from tests.support.benchmark_runs import row_after, run_benchmark

NAME = "shakespeare-char-resid-l1"


@pytest.fixture(scope="module")
def model():
    return HookedSAETransformer.from_model(interp.load_model("shakespeare-char")).eval()


@pytest.fixture(scope="module")
def sae():
    return interp.load_sae(NAME)


@pytest.fixture(scope="module")
def record():
    return json.loads((interp.sae.shipped._sae_folder(NAME) / "training.json").read_text())


def test_loads_by_name_and_fits_the_model(model, sae):
    assert NAME in interp.list_saes() == list_saes()
    assert interp.sae.load_sae(NAME).cfg.to_dict() == sae.cfg.to_dict()
    assert sae.cfg.hook_name == "blocks.1.hook_resid_post"
    assert sae.cfg.architecture == "topk" and sae.cfg.k == 16
    assert (sae.cfg.d_in, sae.cfg.d_sae) == (model.cfg.d_model, 8 * model.cfg.d_model)
    folder = interp.sae.shipped._sae_folder(NAME)
    assert sum(p.stat().st_size for p in folder.iterdir()) < 2_000_000
    with pytest.raises(SAEFormatError, match="did you mean 'shakespeare-char-resid-l1'"):
        interp.load_sae("shakespeare-char-resid-l2")


def card_value(card, label):
    row = next(line for line in card.splitlines() if line.startswith(f"| {label}"))
    return float(re.findall(r"\*\*(-?[\d.]+)", row)[0])


def test_card_agrees_with_the_training_record(record):
    card, figures = sae_card(NAME), record["figures"]
    assert card_value(card, "explained variance") == round(figures["explained_variance"], 4)
    assert card_value(card, "L0") == round(figures["l0"], 1)
    assert card_value(card, "dead features") == round(100 * figures["dead_fraction"], 1)
    assert card_value(card, "**loss added") == round(figures["ce_loss_added"], 4)
    assert figures["explained_variance"] >= 0.9


def test_card_figures_are_recomputed(model, sae, record):
    text = split_text(default_text())[1][:QUICK_EVAL_CHARS]
    figures = sae_figures(model, sae, text)
    for key, expected in record["figures_quick"].items():
        assert figures[key] == pytest.approx(expected, abs=1e-4), key
    full = record["figures"]  # the whole held-out text: the quick figures are close to it
    assert figures["explained_variance"] == pytest.approx(full["explained_variance"], abs=0.01)
    assert figures["ce_loss_added"] == pytest.approx(full["ce_loss_added"], abs=0.03)
    assert figures["l0"] == full["l0"] and figures["dead_fraction"] <= 0.01


def test_attribution_ranks_features_as_exact_patching(model, sae):
    text = split_text(default_text())[1][1000:1065]
    tokens, answer = model.to_tokens(text[:-1]), model.to_single_token(text[-1])

    def metric(logits):
        return logits[0, -1].log_softmax(-1)[answer]

    attribution, acts = feature_attribution(model, [sae], tokens, metric)[sae.cfg.hook_name]
    index = (acts[0] > 0).nonzero()  # every active (position, feature): 64 x 16
    assert len(index) == 64 * 16
    clean = metric(model(tokens))
    exact = clean - feature_patch(model, sae, tokens, metric, index)  # the effect of ablating
    estimate = attribution[0][index[:, 0], index[:, 1]]
    rho = spearman(estimate, exact)
    print(f"Spearman(attribution, exact ablation) over {len(index)} features: {rho:.3f}")
    assert rho > 0.85  # 0.913 with torch 2.13 CPU
    top_exact = set(exact.abs().topk(10).indices.tolist())
    assert len(top_exact & set(estimate.abs().topk(10).indices.tolist())) >= 7
    assert int(exact.abs().argmax()) == int(estimate.abs().argmax())


def test_benchmark_smoke_mode_prints_every_figure():
    out = run_benchmark("bench_sae.py", "--smoke")
    assert "spliced features equal the SAE on the plain cache: True" in out
    for label in [
        "spliced forward caching features / plain forward caching the hook",
        "spliced / plain forward + the same SAE by hand",
        "run_with_cache_with_saes / plain forward caching the hook",
        "top_activations, tokens/s",
        "top_activations / feature_acts alone",
    ]:
        assert float(re.search(r"(\d+(\.\d+)?)x?\s*$", row_after(out, label)).group(1)) > 0
