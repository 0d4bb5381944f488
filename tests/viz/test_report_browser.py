"""The report and the attention views in headless Chromium: they render offline with no
JavaScript error, and hostile token strings stay text."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.viz.activations import token_activations
from interp.viz.attention import attention_heads, attention_pattern
from interp.viz.report import write_report
from tests.conftest import CHROMIUM, NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM
XSS_SCRIPT = "</script><script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
XSS_IMG_NO_SPACES = "<img/src/onerror=alert(2)>"  # runs if ever parsed as markup
# Put first in <head>: records errors, console.error calls and alert() on the <html> element.
PROBE = """<script>
(function () {
  var root = document.documentElement, errors = [];
  function record(message) { errors.push(message); root.setAttribute('data-js-errors', errors.join(' | ')); }
  window.addEventListener('error', function (e) { record('error: ' + e.message); });
  window.addEventListener('unhandledrejection', function (e) { record('rejection: ' + e.reason); });
  var consoleError = console.error;
  console.error = function () { record('console.error: ' + Array.from(arguments).join(' ')); consoleError.apply(console, arguments); };
  window.alert = function (x) { root.setAttribute('data-alert', String(x)); };
})();
</script>"""  # noqa: E501


def render_dom(page: Path) -> tuple[str, str]:
    """Open ``page`` (with the probe) in headless Chromium; returns (html tag, body DOM)."""
    probed = page.with_suffix(".probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1))
    result = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--virtual-time-budget=10000",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            probed.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Uncaught" not in result.stderr, result.stderr[-2000:]
    html_tag = re.search(r"<html[^>]*>", result.stdout).group(0)
    body = result.stdout[result.stdout.index("<body") :]
    body = re.sub(r"<script\b.*?</script>", "", body, flags=re.S)  # keep rendered markup only
    return html_tag, body


def assert_clean(html_tag: str) -> None:
    assert "data-js-errors" not in html_tag, html_tag
    assert "data-alert" not in html_tag, html_tag


@pytest.fixture(scope="module")
def model():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_vocab=50257, n_ctx=128, attn_only=True, seed=0
    )
    return HookedTransformer(cfg, tokenizer="gpt2")


def test_attention_views_render_offline_without_errors(model, tmp_path):
    prompt = "The cat sat on the mat. The cat sat"
    _, cache = model.run_with_cache(prompt)
    tokens = model.to_str_tokens(prompt)
    views = {
        "heads": attention_heads(cache, tokens, layer=1),
        "pattern": attention_pattern(cache, tokens, layer=0, head=1),
        "tokens": token_activations(cache["z", 0][0].norm(dim=-1), tokens, labels=["H0", "H1"]),
    }
    for name, view in views.items():
        html_tag, body = render_dom(view.save(tmp_path / f"{name}.html"))
        assert_clean(html_tag)
        rendered = body[body.index('class="circuitsvis-view"') :]
        assert len(rendered) > 300, f"{name} rendered nothing"
        if name == "heads":
            assert "Head Selector" in body and body.count("<canvas") >= 3  # thumbnails + zoom
            assert "L1H0" in body and "L1H1" in body
        if name == "pattern":
            assert "<canvas" in body
        if name == "tokens":
            assert "colored-tokens" in body and "␣cat" in body  # a space shown as ␣


def test_hostile_tokens_render_as_text_in_views(tmp_path):
    tokens = ["<|endoftext|>", XSS_SCRIPT, XSS_IMG, XSS_IMG_NO_SPACES, " & more"]
    pattern = torch.softmax(torch.randn(2, 5, 5).tril() - torch.triu(torch.ones(5, 5), 1) * 1e9, -1)
    views = {
        # AttentionHeads draws tokens on canvases; its head names are HTML text.
        "heads": attention_heads(pattern, tokens, head_names=[XSS_IMG_NO_SPACES, XSS_SCRIPT]),
        "tokens": token_activations(torch.linspace(-1, 1, 5), tokens),
    }
    for name, view in views.items():
        html_tag, body = render_dom(view.save(tmp_path / f"xss-{name}.html"))
        assert_clean(html_tag)
        assert not re.search(r"<(img|script)\b", body), "a token became an element"
        text = body.replace("&nbsp;", " ")
        assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert "&lt;img/src/onerror=alert(2)&gt;" in text
        if name == "tokens":
            assert '"&gt;&lt;img␣src=x␣onerror=alert(1)&gt;' in text  # spaces shown as ␣
            assert "&lt;|endoftext|&gt;" in text and "␣&amp;␣more" in text


def test_report_renders_every_part_without_errors_and_escapes_the_prompt(model, tmp_path):
    prompt = f"Say {XSS_SCRIPT} and {XSS_IMG} then {XSS_IMG_NO_SPACES}. Say"
    corrupted = f"Say {XSS_SCRIPT} and {XSS_IMG} then {XSS_IMG_NO_SPACES}. Yes"
    path, analysis = write_report(
        model, prompt, tmp_path / "report.html", corrupted, warnings=[XSS_IMG_NO_SPACES]
    )
    html_tag, body = render_dom(path)
    assert_clean(html_tag)
    assert not re.search(r"<(img|script)\b", body), "the prompt became an element"
    # The chosen layer's heads (drawn on demand: thumbnails and one pattern) and all three
    # plotly figures.
    assert 'data-drawn="0"' in body and 'class="interp-heads"' in body
    assert body.count('class="interp-pattern"') == 1
    assert body.count('class="plot-container plotly"') == 3
    assert body.count('class="main-svg"') >= 3
    # The prompt is shown as text: its tokens in the token boxes, the warning verbatim.
    assert "&lt;img/src/onerror=alert(2)&gt;" in body
    token_boxes = re.findall(r"<span class=\"token\">(.*?)<sub>", body)
    assert len(token_boxes) == 2 * len(analysis.tokens)  # the prompt and the corrupted prompt
