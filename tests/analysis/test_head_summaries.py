"""Summaries name only what the numbers support: a head only at HEAD_THRESHOLD or more, an
induction head only after a previous-token head in an earlier layer (never in layer 0), and
a patching result whose clean and corrupted metrics are too close carries a warning."""

from __future__ import annotations

import math

import pytest
import torch

import interp
from interp.analysis import HEAD_THRESHOLD, induction_layers, strongest_heads
from interp.serve.examples import SYMBOLS
from interp.viz.report import report_html, summary_text
from interp.viz.report_data import MIN_PATCHING_GAP, analyse_prompt, patching_gap_warning

PROMPT, CORRUPTED = SYMBOLS  # attn-only-2l's induction prompt: L0H0 previous token, L1H0 induction


@pytest.fixture(scope="module")
def model():
    return interp.load_model("attn-only-2l")


def scores(previous, duplicate, induction):
    return {
        "previous_token_head": torch.tensor(previous),
        "duplicate_token_head": torch.tensor(duplicate),
        "induction_head": torch.tensor(induction),
    }


def test_an_induction_head_needs_a_previous_token_head_upstream():
    # layer 0's induction score is the highest, but layer 0 has nothing upstream
    best = strongest_heads(
        scores([[0.9, 0.1], [0.2, 0.1]], [[0.0, 0.1], [0.05, 0.0]], [[0.8, 0.1], [0.2, 0.5]])
    )
    assert best == {
        "previous_token_head": ("L0H0", pytest.approx(0.9)),
        "duplicate_token_head": None,  # 0.1 < HEAD_THRESHOLD
        "induction_head": ("L1H1", pytest.approx(0.5)),
    }
    # no previous-token head at all: no induction head, however high its score
    weak_previous = scores([[0.2], [0.1]], [[0.0], [0.0]], [[0.9], [0.9]])
    assert strongest_heads(weak_previous)["induction_head"] is None
    # a previous-token head in layer 1 licenses layers 2 and up, not layer 1 itself
    layers = induction_layers(torch.tensor([[0.0], [0.5], [0.0], [0.0]]))
    assert layers.tolist() == [False, False, True, True]


def test_nan_scores_never_win_and_the_threshold_is_inclusive():
    nan = math.nan
    best = strongest_heads(
        scores([[nan, HEAD_THRESHOLD]], [[nan, nan]], [[nan, nan]]), threshold=HEAD_THRESHOLD
    )
    assert best["previous_token_head"] == ("L0H1", pytest.approx(HEAD_THRESHOLD))
    assert best["duplicate_token_head"] is None and best["induction_head"] is None


def test_the_summary_names_only_heads_above_the_threshold(model):
    analysis = analyse_prompt(model, PROMPT)
    text = summary_text(analysis)
    assert "top previous token head: L0H0 (0.95)" in text
    assert "top induction head: L1H0 (0.45)" in text
    assert f"top duplicate token head: none (no head above {HEAD_THRESHOLD})" in text
    # no repeated token: nothing is an induction head, though L1H0 still has a score
    plain = analyse_prompt(model, "1 2 3 4 5 6")
    assert plain.top_heads()["induction"] is None
    assert f"top induction head: none (no head above {HEAD_THRESHOLD})" in summary_text(plain)
    page = report_html(plain)
    assert f"<td>induction</td><td>no head above {HEAD_THRESHOLD}</td>" in page


def test_the_report_warns_when_the_patching_metric_is_ill_conditioned(model):
    answers = {"answer": "501", "wrong_answer": "77"}
    apart = analyse_prompt(model, PROMPT, CORRUPTED, **answers)
    gap = apart.patching.clean_logit_diff - apart.patching.corrupted_logit_diff
    assert abs(gap) > MIN_PATCHING_GAP and not apart.warnings
    assert "ill-conditioned" not in summary_text(apart)

    same = analyse_prompt(model, PROMPT, PROMPT, **answers)  # corrupted = clean: a gap of 0
    warning = patching_gap_warning(
        same.patching.clean_logit_diff, same.patching.corrupted_logit_diff
    )
    assert warning and f"under {MIN_PATCHING_GAP}" in warning and same.warnings == [warning]
    text = summary_text(same)
    assert "(ill-conditioned metric: see the warning)" in text and f"warning: {warning}" in text
    patching_section = report_html(same).split("<section id='patching'>")[1]
    assert "<p class='warning'>The clean and corrupted logit differences" in patching_section


def test_the_dashboard_names_the_same_heads(model):
    from starlette.testclient import TestClient

    from interp.serve import create_app

    local = {"base_url": "http://127.0.0.1", "client": ("127.0.0.1", 50000)}
    with TestClient(create_app({"attn-only-2l": model}), **local) as client:
        body = {"model": "attn-only-2l"}
        repeated = client.post("/api/head_scores", json=body | {"prompt": PROMPT}).json()
        plain = client.post("/api/head_scores", json=body | {"prompt": "1 2 3 4 5 6"}).json()
    assert repeated["threshold"] == HEAD_THRESHOLD
    strongest = analyse_prompt(model, PROMPT).top_heads()
    assert repeated["strongest"] == {
        kind: {"head": best[0], "score": pytest.approx(best[1])} if best else None
        for kind, best in strongest.items()
    }
    assert repeated["strongest"]["induction"]["head"] == "L1H0"
    assert plain["strongest"]["induction"] is None
