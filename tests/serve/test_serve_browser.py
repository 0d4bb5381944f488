"""The dashboard page in headless Chromium (Playwright, the system's chromium): it works with
no network, state survives a reload, no console errors, hostile prompts stay text.

Screenshots land in the test's tmp_path (set INTERP_SCREENSHOTS=DIR to keep them there)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import DEMO_CORRUPTED, DEMO_PROMPT
from interp.serve import BackgroundServer, create_app
from tests.conftest import CHROMIUM, NEEDS_CHROMIUM

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM
XSS_SCRIPT = "</script><script>window.__xss = 1</script>"
XSS_IMG = '"><img src=x onerror="window.__xss = 2">'
XSS_BOLD = "<b>bold</b> &amp;"


@pytest.fixture(scope="module")
def server():
    gpt2_tokens = HookedTransformer(
        HookedTransformerConfig(
            n_layers=2, d_model=32, n_heads=2, d_vocab=50257, n_ctx=128, attn_only=True, seed=0
        ),
        tokenizer="gpt2",
    )
    models = {"attn-only-2l": interp.load_model("attn-only-2l"), "tiny-gpt2": gpt2_tokens}
    with BackgroundServer(create_app(models)) as server:
        yield server


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, server):
    """A page that records console errors, page errors, dialogs and every request that
    leaves the server; the test fails if any happened."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else 0)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))

    def offline(route):
        problems.append(f"request outside the server: {route.request.url}")
        route.abort()

    page.route(lambda url: not url.startswith(server.url), offline)
    page.expected_errors = []  # substrings of console errors a test provokes on purpose
    yield page
    context.close()
    problems = [p for p in problems if not any(e in p for e in page.expected_errors)]
    assert not problems, problems


def screenshot(page, tmp_path: Path, name: str) -> None:
    folder = Path(os.environ.get("INTERP_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def settle(page) -> None:
    # Selectors, not wait_for_function: the page's CSP forbids the eval that one needs.
    page.wait_for_selector("body[data-busy='0']", state="attached", timeout=60_000)


def test_prompt_layer_head_and_patching(page, server, tmp_path):
    page.goto(server.url)
    page.wait_for_selector("body[data-ready='1']", state="attached")
    page.fill("#prompt", DEMO_PROMPT)
    page.click("#analyse")
    page.wait_for_selector("#tokens .token")
    settle(page)
    assert page.locator("#tokens .token").count() == 24
    assert page.locator("#predictions tbody tr td.text").first.text_content() == "501"
    page.select_option("#layer", "1")
    page.wait_for_selector("#head-grid .head >> text=L1H0")
    page.click("#head-grid .head >> text=L1H0")
    page.wait_for_selector("#pattern canvas")
    assert page.text_content("#pattern-title") == "L1H0 attention pattern"
    for plot in ("#logit-lens", "#dla", "#head-scores"):
        assert page.locator(f"{plot} .main-svg").count() >= 1, plot
    page.fill("#corrupted", DEMO_CORRUPTED)
    page.click("#patch")
    page.wait_for_selector("#patching-resid .main-svg")
    settle(page)
    assert page.text_content("#patching-state") == "done: 4 of 4 steps"
    assert page.locator("#patching-heads .main-svg").count() >= 1
    # The resid heatmap's x axis holds the prompt's tokens with their positions.
    assert "501|12" in page.text_content("#patching-resid")
    screenshot(page, tmp_path, "dashboard")

    # The URL holds the state: a reload (or a shared link) shows the same view.
    url = page.url
    assert "layer=1" in url and "head=0" in url and "prompt=23+187" in url
    page.goto("about:blank")
    page.goto(url)
    page.wait_for_selector("#pattern canvas")
    page.wait_for_selector("#patching-resid .main-svg")
    settle(page)
    assert page.input_value("#prompt") == DEMO_PROMPT
    assert page.input_value("#layer") == "1"
    assert page.text_content("#pattern-title") == "L1H0 attention pattern"
    assert page.input_value("#corrupted") == DEMO_CORRUPTED
    screenshot(page, tmp_path, "dashboard-reloaded")


def test_bad_input_shows_the_servers_error(page, server, tmp_path):
    page.expected_errors.append("the server responded with a status of 422")
    page.goto(server.url + "#model=attn-only-2l")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    page.fill("#prompt", "hello")
    page.click("#analyse")
    page.wait_for_selector("#tokens-error:not([hidden])")
    assert "'hello' is not a symbol of this model" in page.text_content("#tokens-error")
    page.fill("#prompt", "1 2 3")
    page.click("#analyse")
    page.wait_for_selector("#tokens .token")
    settle(page)
    page.fill("#corrupted", "1 2")
    page.click("#patch")
    page.wait_for_selector("#patching-error:not([hidden])")
    assert "The corrupted prompt is 3 tokens and the prompt 4" in page.text_content(
        "#patching-error"
    )
    screenshot(page, tmp_path, "error")


def test_injected_prompts_show_as_text(page, server, tmp_path):
    prompt = f"Say {XSS_SCRIPT} then {XSS_IMG} and {XSS_BOLD}. Say"
    page.goto(server.url + "#model=tiny-gpt2&layer=0&head=1")
    page.wait_for_selector("body[data-ready='1']", state="attached")
    page.fill("#prompt", prompt)
    page.click("#analyse")
    page.wait_for_selector("#pattern canvas")
    settle(page)
    page.fill("#corrupted", prompt.replace("Say", "Yes"))
    page.click("#patch")
    page.wait_for_selector("#patching-resid .main-svg")
    settle(page)
    screenshot(page, tmp_path, "injected")
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("img").count() == 0
    assert page.locator("main script, main b").count() == 0
    boxes = page.locator("#tokens .token").all_text_contents()  # each token, then its index
    tokens = "".join(box[: -len(str(i))] for i, box in enumerate(boxes)).replace("\u2423", " ")
    assert tokens == "<|endoftext|>" + prompt
    assert "<img src=x onerror=" in tokens
    assert "<b>bold</b> &amp;" in tokens
    # plotly's axes show the same characters as text (the attention view draws them on a canvas).
    for plot in ("#patching-resid", "#logit-lens"):  # labels are "token|position"
        text = page.text_content(plot)
        # a space is shown as ␣ (interp.analysis.labels.token_label)
        assert "␣</|2script|3><|4script|5>|6" in text and "␣<|36b|37>|38bold|39</|40b" in text
        assert "␣&|43amp|44;|45" in text
