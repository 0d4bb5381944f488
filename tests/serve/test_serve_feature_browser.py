"""The feature browser page in headless Chromium (Playwright, the system's chromium): search,
a clicked token's features, a feature's dataset view, steering (the shown logits are the
spliced SAE's with the feature clamped) and two prompts compared; no console error, no
request off the server. Screenshots land in tmp_path (INTERP_SCREENSHOTS=DIR keeps them)."""

from __future__ import annotations

import pytest
import torch

import interp
from interp.sae.splice import HookedSAETransformer
from interp.serve import BackgroundServer, create_app
from interp.serve.feature_index import FeatureIndex
from interp.train import default_text
from tests.conftest import NEEDS_CHROMIUM
from tests.serve import test_serve_browser as dashboard_tests
from tests.serve.test_serve_browser import screenshot, settle

pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM
browser, page = dashboard_tests.browser, dashboard_tests.page  # the dashboard tests' fixtures
CHAR = "shakespeare-char"
PROMPT = "ROMEO: What say you"


@pytest.fixture(scope="module")
def parts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("features")
    (folder / "data.txt").write_text(default_text()[:4000])
    model, sae = interp.load_model(CHAR), interp.load_sae("shakespeare-char-resid-l1")
    index = FeatureIndex.build(model, sae, folder / "data.txt", cache_dir=folder / "cache")
    return model, sae, index


@pytest.fixture(scope="module")
def server(parts):
    model, sae, index = parts
    app = create_app({CHAR: model}, saes={CHAR: sae}, feature_indexes={CHAR: index})
    with BackgroundServer(app) as server:
        yield server


def open_browser(page, server, prompt=PROMPT):
    page.goto(f"{server.url}features#model={CHAR}&prompt={prompt}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    settle(page)


def test_search_a_token_and_a_feature_page(page, server, parts, tmp_path):
    _, _, index = parts
    open_browser(page, server)
    page.fill("#search-query", "citizen")
    page.click("#search-form button")
    page.wait_for_selector("#search-results .feature-link")
    first = int(page.locator("#search-results .feature-link").first.get_attribute("data-feature"))
    assert "citizen" in index.context_text[first]
    page.locator("#fb-tokens .token").nth(3).click()
    page.wait_for_selector("#token-features .feature-link")
    assert 1 <= page.locator("#token-features .feature-link").count() <= 10
    page.locator("#token-features .feature-link").first.click()
    page.wait_for_selector("#feature-section:not([hidden]) #feature-contexts .ctx")
    settle(page)
    assert page.locator("#feature-contexts .ctx").count() >= 1
    assert page.locator("#feature-histogram .histogram div").count() >= 1
    assert page.locator("#feature-logits tbody tr").count() == 10
    assert "Active on" in page.text_content("#feature-stats")
    screenshot(page, tmp_path, "feature_browser_feature")


def test_steering_shows_the_spliced_sae_logits(page, server, parts, tmp_path):
    model, sae, _ = parts
    open_browser(page, server)
    page.fill("#steer-feature", "185")
    page.select_option("#steer-mode", "clamp")
    page.fill("#steer-value", "8")
    page.click("#steer-form button")
    page.wait_for_selector("#steer-steered tbody tr")
    settle(page)

    def clamp(acts, hook):
        acts[..., 185] = 8.0
        return acts

    spliced = HookedSAETransformer.from_model(model)
    with torch.no_grad(), spliced.saes([sae], use_error_term=True):
        hook = f"{sae.cfg.hook_name}.hook_sae_acts_post"
        logits = spliced.run_with_hooks(model.to_tokens(PROMPT), fwd_hooks=[(hook, clamp)])[0, -1]
    shown = page.locator("#steer-steered tbody tr td:nth-child(2)").all_text_contents()
    expected = logits.topk(len(shown)).values.tolist()
    assert [float(v) for v in shown] == pytest.approx(expected, abs=1.5e-3)
    base = page.locator("#steer-base tbody tr td:nth-child(2)").all_text_contents()
    assert base != shown
    screenshot(page, tmp_path, "feature_browser_steering")


def test_two_prompts_side_by_side(page, server, tmp_path):
    open_browser(page, server)
    page.fill("#search-query", "7")
    page.select_option("#search-by", "id")
    page.click("#search-form button")
    page.click("#search-results .feature-link")
    page.wait_for_selector("#feature-section:not([hidden])")
    page.fill("#compare-a", "ROMEO: What say you")
    page.fill("#compare-b", "JULIET: O Romeo & yes")
    page.click("#compare-form button")
    page.wait_for_selector("#compare-right .ctx")
    settle(page)
    assert "ROMEO" in page.text_content("#compare-left h3")
    assert "JULIET:␣O␣Romeo␣&" in page.text_content("#compare-right h3")
    assert "feature #7" in page.text_content("#compare-left")
    screenshot(page, tmp_path, "feature_browser_compare")


def test_the_dashboard_sae_panel_lists_a_clicked_tokens_features(page, server, tmp_path):
    page.goto(f"{server.url}#model={CHAR}&prompt={PROMPT}")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    settle(page)
    assert page.locator("#sae-features a").count() == 0  # no wall of links
    page.locator("#sae-features .token").nth(3).click()
    links = page.locator("#sae-token-features a")
    assert 1 <= links.count() <= 10
    feature = links.first.text_content().split()[0].lstrip("#")
    screenshot(page, tmp_path, "dashboard_sae_panel")
    links.first.click()
    page.wait_for_selector("#feature-section:not([hidden]) #feature-contexts .ctx")
    assert page.text_content("#feature-title").endswith(f"feature {feature}")
