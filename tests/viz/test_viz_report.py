"""interp.viz.report_data and interp.viz.report: the numbers the report shows, checked
against naive references, and the page built from them."""

from __future__ import annotations

import json

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.utils import get_act_name
from interp.viz.report import ASSETS, SCRIPTS, STATIC, report_html, summary_text, write_report
from interp.viz.report_data import (
    analyse_prompt,
    prompt_head_scores,
    top_predictions_by_stage,
)
from tests.support.tolerances import error_bound, model_error_bound

PROMPT = "The cat sat on the mat. The cat sat"
CORRUPTED = "The dog sat on the mat. The dog sat"


@pytest.fixture(scope="module")
def model():
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=2,
        d_mlp=64,
        d_vocab=50257,
        n_ctx=64,
        init_range=0.3,
        seed=1,
    )
    return HookedTransformer(cfg, tokenizer="gpt2").eval()


def test_report_logit_lens_ends_with_the_model_output(model):
    logits, _ = model.run_with_cache(PROMPT)
    analysis = analyse_prompt(model, PROMPT)
    probs, predictions = top_predictions_by_stage(analysis.logit_lens)
    assert probs.shape == (2 * model.cfg.n_layers + 1, len(analysis.tokens))  # pre, mid, final
    final = logits[0].softmax(dim=-1)
    torch.testing.assert_close(probs[-1], final.max(dim=-1).values)
    assert predictions[-1] == [model.tokenizer.token_str(int(i)) for i in final.argmax(-1)]
    assert analysis.top_predictions[0][0] == predictions[-1][-1]


def test_head_scores_match_a_naive_loop(model):
    tokens = model.to_tokens(PROMPT)
    _, cache = model.run_with_cache(tokens)
    scores = prompt_head_scores(model, tokens, cache)
    ids = tokens[0].tolist()
    for layer in range(model.cfg.n_layers):
        for head in range(model.cfg.n_heads):
            pattern = cache["pattern", layer][0, head]
            prev = dup = ind = 0.0
            for q in range(len(ids)):
                for k in range(q):
                    prev += float(pattern[q, k]) * (k == q - 1)
                    dup += float(pattern[q, k]) * (ids[k] == ids[q])
                    ind += float(pattern[q, k]) * (k > 0 and ids[k - 1] == ids[q])
            total = float(pattern.sum())
            # Sums over query-key pairs of fractions of attention, in float32 there.
            bound = error_bound(torch.float32, reduction=len(ids) ** 2, depth=2)
            assert scores["previous token"][layer, head] == pytest.approx(prev / total, abs=bound)
            assert scores["duplicate token"][layer, head] == pytest.approx(dup / total, abs=bound)
            assert scores["induction"][layer, head] == pytest.approx(ind / total, abs=bound)


def test_batched_patching_matches_one_forward_per_index(model):
    clean, corrupted = model.to_tokens(PROMPT), model.to_tokens(CORRUPTED)
    _, cache = model.run_with_cache(clean)
    answer, wrong = model.to_single_token(" on"), model.to_single_token(" mat")
    results = analyse_prompt(model, PROMPT, CORRUPTED, answer=" on", wrong_answer=" mat").patching
    span = results.clean_logit_diff - results.corrupted_logit_diff
    for layer in range(model.cfg.n_layers):
        for position in range(clean.shape[1]):

            def patch(resid, hook, position=position, layer=layer):
                resid[:, position] = cache["resid_pre", layer][:, position]
                return resid

            with torch.no_grad():
                logits = model.run_with_hooks(
                    corrupted, fwd_hooks=[(get_act_name("resid_pre", layer), patch)]
                )
            expected = float(logits[0, -1, answer] - logits[0, -1, wrong])
            normalised = (expected - results.corrupted_logit_diff) / span
            # Logit differences (twice a logit's error) subtracted, then divided by the span.
            bound = 4 * model_error_bound(model.cfg, logits.abs().max()) / abs(span)
            assert results.results[layer, position] == pytest.approx(normalised, abs=bound)


def test_analysis_normalises_patching_and_checks_lengths(model):
    analysis = analyse_prompt(model, PROMPT, CORRUPTED, answer=" on", wrong_answer=" mat")
    patching = analysis.patching
    changed = [
        i
        for i, (a, b) in enumerate(zip(analysis.tokens, patching.corrupted_tokens, strict=True))
        if a != b
    ]
    assert patching.normalised and changed == [2, 9]
    # Layer 0's input at a position whose token is the same in both prompts is the same
    # embedding, so patching it changes nothing: 0 on the normalised scale.
    unchanged = [i for i in range(len(analysis.tokens)) if i not in changed]
    span = patching.clean_logit_diff - patching.corrupted_logit_diff
    with torch.no_grad():
        logits = model(model.to_tokens(CORRUPTED))
    atol = 4 * model_error_bound(model.cfg, logits.abs().max()) / abs(span)
    torch.testing.assert_close(
        patching.results[0, unchanged], torch.zeros(len(unchanged)), atol=atol, rtol=0
    )
    with pytest.raises(ValueError, match="same length in tokens"):
        analyse_prompt(model, PROMPT, "The dog")
    with pytest.raises(ValueError, match="same token"):
        analyse_prompt(model, PROMPT, CORRUPTED, answer=" on", wrong_answer=" on")
    with pytest.raises(ValueError, match="empty"):
        analyse_prompt(model, "")


def test_report_page_holds_every_section_once_and_loads_its_scripts_beside_it(model, tmp_path):
    path, analysis = write_report(
        model, PROMPT, tmp_path / "r.html", CORRUPTED, warnings=["random <weights>"]
    )
    page = path.read_text()
    for section in ("summary", "attention", "logit-lens", "head-scores", "patching"):
        assert page.count(f"<section id='{section}'>") == 1
    assert "plotly.js (cartesian" not in page and "InterpAttention = " not in page
    for name in SCRIPTS:
        assert page.count(f"<script src='report_assets/{name}'>") == 1
        assert (tmp_path / "report_assets" / name).read_bytes() == (STATIC / name).read_bytes()
    assert page.count("InterpAttention.heads(") == 1  # the chosen layer, drawn on demand
    assert "random &lt;weights&gt;" in page
    text = summary_text(analysis)
    assert "top induction head: " in text and "patching: strongest effect" in text
    assert "<section id='patching'>" not in report_html(analyse_prompt(model, PROMPT))


def test_a_self_contained_report_inlines_each_script_once(model, tmp_path):
    path, _ = write_report(model, PROMPT, tmp_path / "r.html", self_contained=True)
    page = path.read_text()
    assert page.count("plotly.js (cartesian") == 1 and page.count("InterpAttention = ") == 1
    assert "<script src" not in page and not (tmp_path / "report_assets").exists()


def test_a_104_character_report_and_its_scripts_weigh_under_2_5_mb(tmp_path):
    import interp

    model = interp.load_model("shakespeare-char")
    prompt = (
        "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet "
        "is the sun. Arise!!"
    )
    assert len(prompt) == 104
    path, _ = write_report(model, prompt, tmp_path / "report.html")
    weight = path.stat().st_size + sum(f.stat().st_size for f in (tmp_path / ASSETS).iterdir())
    assert weight < 2.5e6, weight


def test_the_page_stores_each_pattern_in_thousandths(model):
    analysis = analyse_prompt(model, PROMPT)
    page = report_html(analysis)
    start = page.index("<script type='application/json' id='attention-data'>")
    data = json.loads(page[page.index(">", start) + 1 : page.index("</script>", start)])
    for layer, pattern in enumerate(analysis.patterns):
        rows = data["patterns"][layer]
        restored = torch.zeros_like(pattern)
        for head, head_rows in enumerate(rows):
            for query, row in enumerate(head_rows):
                assert len(row) == query + 1  # causal: nothing stored after the query
                restored[head, query, : len(row)] = torch.tensor(row) / 1000
        torch.testing.assert_close(restored, pattern, atol=5e-4, rtol=0)
