"""The dashboard's state in headless Chromium: every panel is emptied when the model or the
prompt changes or its own request fails (no 4-layer result under a 2-layer model, no old
job status), each error shows in the panel it concerns, patching has its own answers and
shows its clean and corrupted baselines (with a warning when they are too close), and a
model switch fills in that model's example prompt.

Screenshots land in the test's tmp_path (set INTERP_SCREENSHOTS=DIR to keep them there)."""

from __future__ import annotations

import pytest

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import HEAD_THRESHOLD
from interp.serve import BackgroundServer, create_app
from interp.serve.examples import IOI, SYMBOLS
from interp.viz.report_data import MIN_PATCHING_GAP
from tests.conftest import NEEDS_CHROMIUM
from tests.serve import test_serve_browser as dashboard

pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM
SMALL, DEEP = "attn-only-2l", "tiny-4l"  # 2 attention-only layers; 4 layers with MLPs
REFUSED = "the server responded with a status of 422"
browser, page = dashboard.browser, dashboard.page  # the same fixtures: offline, no console errors
screenshot, settle = dashboard.screenshot, dashboard.settle


@pytest.fixture(scope="module")
def server():
    deep = HookedTransformer(
        HookedTransformerConfig(
            n_layers=4,
            d_model=32,
            n_heads=2,
            d_mlp=64,
            d_vocab=50257,
            n_ctx=64,
            act_fn="gelu",
            seed=0,
        ),
        tokenizer="gpt2",
    )
    with BackgroundServer(create_app({DEEP: deep, SMALL: interp.load_model(SMALL)})) as server:
        yield server


def open_page(page, server, model: str) -> None:
    page.goto(f"{server.url}#model={model}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    settle(page)


def patch(page) -> None:
    page.click("#patch")
    page.wait_for_selector("#patching-resid .main-svg, #patching-error:not([hidden])")
    settle(page)


def shown(page, selector: str) -> bool:
    return page.locator(f"{selector}:not([hidden])").count() == 1


def assert_empty(page, *plots: str) -> None:
    for plot in plots:
        assert page.locator(f"{plot} .main-svg").count() == 0, plot
        assert page.text_content(plot) == "", plot


def test_a_model_switch_leaves_nothing_of_the_old_model(page, server, tmp_path):
    open_page(page, server, DEEP)
    assert page.input_value("#prompt") == IOI[0] and page.input_value("#corrupted") == IOI[1]
    assert "MLP" in page.text_content("#dla") and "L3" in page.text_content("#dla")
    patch(page)
    assert page.text_content("#patching-state").startswith("done: ")
    screenshot(page, tmp_path, "state-deep-model")

    page.select_option("#model", SMALL)
    page.wait_for_selector("#dla .main-svg")
    settle(page)
    assert page.input_value("#prompt") == SYMBOLS[0]  # the new model's example
    assert page.input_value("#corrupted") == SYMBOLS[1]
    dla = page.text_content("#dla")
    assert "MLP" not in dla and "L3" not in dla and "L1" in dla
    assert page.text_content("#patching-state") == ""  # not the old "done: n of n steps"
    assert_empty(page, "#patching-resid", "#patching-heads")
    assert page.text_content("#patching-baselines") == ""
    assert page.locator("#head-grid .head").count() == 1  # attn-only-2l: one head a layer
    assert page.locator("#tokens .token").count() == 24
    screenshot(page, tmp_path, "state-switched-model")


def test_a_failed_answer_empties_its_panel_only(page, server, tmp_path):
    page.expected_errors.append(REFUSED)
    open_page(page, server, SMALL)
    page.fill("#answer", "e")  # not a symbol of attn-only-2l
    page.click("#dla-form button")
    page.wait_for_selector("#dla-error:not([hidden])")
    assert "The answer 'e' cannot be tokenized by attn-only-2l" in page.text_content("#dla-error")
    assert_empty(page, "#dla")
    assert page.text_content("#dla-summary") == ""
    assert page.locator("#logit-lens .main-svg").count() >= 1  # the other panels stay
    assert not shown(page, "#error") and not shown(page, "#patching-error")
    screenshot(page, tmp_path, "state-bad-answer")

    page.fill("#answer", "501")
    page.click("#dla-form button")
    page.wait_for_selector("#dla .main-svg")
    settle(page)
    assert not shown(page, "#dla-error")
    assert page.text_content("#dla-summary").startswith('logit of "501" = ')


def test_patching_has_its_own_answers_and_shows_its_baselines(page, server, tmp_path):
    page.expected_errors.append(REFUSED)
    open_page(page, server, SMALL)
    page.fill("#patch-answer", "e")
    patch(page)
    assert "The answer 'e' cannot be tokenized" in page.text_content("#patching-error")
    assert not shown(page, "#dla-error")  # the DLA panel never read the patching answer
    assert page.text_content("#patching-state") == ""

    page.fill("#patch-answer", "501")
    page.fill("#patch-wrong", "77")
    patch(page)
    assert not shown(page, "#patching-error")
    baselines = page.text_content("#patching-baselines")
    assert baselines.startswith('logit of "501" - logit of "77": clean run ')
    assert "corrupted run " in baselines and "(gap " in baselines
    assert not shown(page, "#patching-warning")  # a gap of several logits
    assert page.text_content("#dla-summary").startswith('logit of "501" = ')  # its own answer
    assert "minus" not in page.text_content("#dla-summary")
    screenshot(page, tmp_path, "state-patching-baselines")

    page.fill("#corrupted", SYMBOLS[0])  # corrupted = clean: the gap is 0
    patch(page)
    assert shown(page, "#patching-warning")
    warning = page.text_content("#patching-warning")
    assert f"under {MIN_PATCHING_GAP}" in warning and "ill-conditioned" in warning
    screenshot(page, tmp_path, "state-patching-warning")


def test_a_failed_prompt_empties_every_panel(page, server, tmp_path):
    page.expected_errors.append(REFUSED)
    open_page(page, server, SMALL)
    patch(page)
    page.fill("#prompt", "1 2 hello")
    page.click("#analyse")
    page.wait_for_selector("#tokens-error:not([hidden])")
    settle(page)
    assert "'hello' is not a symbol of this model" in page.text_content("#tokens-error")
    assert page.locator("#tokens .token, #head-grid .head, #predictions tbody tr").count() == 0
    assert_empty(page, "#logit-lens", "#dla", "#head-scores", "#patching-resid", "#patching-heads")
    assert page.text_content("#patching-state") == ""
    screenshot(page, tmp_path, "state-bad-prompt")


def has_class(page, selector: str, name: str) -> bool:
    return name in (page.get_attribute(selector, "class") or "").split()


def test_edited_inputs_mark_their_panels_stale_until_run(page, server, tmp_path):
    open_page(page, server, SMALL)
    summary = page.text_content("#scores-summary")
    assert "previous token L0H0 (0.95)" in summary and "induction L1H0 (0.45)" in summary
    assert f"duplicate token: no head above {HEAD_THRESHOLD}" in summary
    assert not has_class(page, "main", "stale") and not shown(page, "#stale-note")

    page.fill("#prompt", "1 2 3")  # typed, not analysed: every panel is the old prompt's
    assert has_class(page, "main", "stale") and shown(page, "#stale-note")
    page.fill("#prompt", SYMBOLS[0])  # back to what is drawn
    assert not has_class(page, "main", "stale") and not shown(page, "#stale-note")

    patch(page)
    page.fill("#patch-answer", "77")
    assert has_class(page, "#patching-section", "stale")
    assert not has_class(page, "#dla-section", "stale")
    page.fill("#answer", "501")
    assert has_class(page, "#dla-section", "stale")
    screenshot(page, tmp_path, "state-stale-panels")
    page.click("#dla-form button")
    page.wait_for_selector("#dla .main-svg")
    settle(page)
    assert not has_class(page, "#dla-section", "stale")

    page.fill("#prompt", "1 2 3 4 5 6")  # no repeated token: no induction head
    page.click("#analyse")
    page.wait_for_selector("#tokens .token")
    settle(page)
    assert not has_class(page, "main", "stale") and not shown(page, "#stale-note")
    assert not has_class(page, "#patching-section", "stale")  # its old run was cleared
    assert page.text_content("#patching-state") == ""
    assert f"induction: no head above {HEAD_THRESHOLD}" in page.text_content("#scores-summary")
