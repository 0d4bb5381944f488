"""SAE feature pages, prompt views, ``interp features`` and ``interp report --sae``: the
numbers shown are the analysis's, hostile token strings stay text, the pages open offline
(headless Chromium, no console error)."""

import html
import re
import shutil

import pytest
import torch

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.cli import main
from interp.sae import SAE, SAEConfig
from interp.sae.features import feature_acts, text_windows, top_activations
from interp.sae.views import feature_page_html, prompt_view, write_feature_pages
from interp.train import default_text
from tests.viz.test_report_browser import assert_clean, render_dom

XSS_SCRIPT = "</script><script>alert(1)</script>"
XSS_IMG = '"><img src=x onerror=alert(1)>'
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHIPPED = "shakespeare-char-resid-l1"


@pytest.fixture(scope="module")
def gpt2_tiny():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64, d_vocab=50257, n_ctx=64, seed=0
    )
    return HookedTransformer(cfg, tokenizer="gpt2").eval()


@pytest.fixture(scope="module")
def hostile(gpt2_tiny):
    """An SAE on the tiny GPT-2 and its stats over text full of hostile strings."""
    torch.manual_seed(0)
    sae = SAE(SAEConfig(d_in=32, d_sae=48, hook_name="blocks.0.hook_resid_post"))
    with torch.no_grad():
        sae.W_enc.normal_(0, 0.3)
    text = f"Say {XSS_SCRIPT} and {XSS_IMG} & more. " * 12
    windows = text_windows(gpt2_tiny, text, 16)
    return sae, top_activations(gpt2_tiny, sae, windows, k=4), text


def test_feature_page_shows_the_stats_and_escapes_tokens(gpt2_tiny, hostile):
    sae, stats, _ = hostile
    feature = stats.most_active(1)[0]
    page = feature_page_html(gpt2_tiny, sae, stats, feature)
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    lines = re.findall(r"<div class='ctx'>(.*?)</div>", page)
    contexts = stats.contexts(feature, gpt2_tiny.tokenizer)
    assert len(lines) == len(contexts) == 4
    for line, context in zip(lines, contexts, strict=True):
        value, *spans = re.findall(r"<span[^>]*>(.*?)</span>", line)
        assert value == f"{context['value']:.3f}"
        assert [html.unescape(span) for span in spans] == context["tokens"]
    assert any("&lt;/" in line or "&quot;&gt;&lt;" in line for line in lines)
    assert "<script src=" not in page  # plotly.js inlined: the page opens offline


def test_prompt_view_lists_the_strongest_features(gpt2_tiny, hostile):
    sae, _, text = hostile
    prompt = text[:60]
    table, features = prompt_view(gpt2_tiny, sae, prompt, n_features=3)
    acts = feature_acts(gpt2_tiny, sae, gpt2_tiny.to_tokens(prompt))[0]
    values, indices = acts.topk(3, dim=-1)
    for pos in range(acts.shape[0]):
        for value, feature in zip(values[pos].tolist(), indices[pos].tolist(), strict=True):
            if value > 0:
                assert f"<a href='feature_{feature}.html'>#{feature} {value:.2f}</a>" in table
    assert set(features) == {int(f) for f in indices[values > 0]}
    assert "<script" not in table and "</script" not in table and "&lt;/" in table


def test_write_feature_pages(gpt2_tiny, hostile, tmp_path):
    sae, stats, _ = hostile
    pages = write_feature_pages(gpt2_tiny, sae, stats, tmp_path, n_features=3, prompts=[XSS_IMG])
    names = sorted(p.name for p in pages)
    _, shown = prompt_view(gpt2_tiny, sae, XSS_IMG)
    features = {*stats.most_active(3), *shown}
    assert len(features) > 3
    expected = [f"feature_{f}.html" for f in features]
    assert names == sorted(["index.html", "prompt_0.html", *expected])
    prompt_page = (tmp_path / "prompt_0.html").read_text()
    assert set(re.findall(r"href='(feature_\d+\.html)'", prompt_page)) <= set(expected)
    assert (tmp_path / "plotly.min.js").stat().st_size > 1_000_000
    index = (tmp_path / "index.html").read_text()
    assert all(f"href='{name}'" in index for name in expected)
    assert "<img src=x" not in (tmp_path / "prompt_0.html").read_text() + index
    with pytest.raises(ValueError, match=r"Features \[48\] are outside 0..47"):
        write_feature_pages(gpt2_tiny, sae, stats, tmp_path, features=[48])


def test_interp_features_command(tmp_path, capsys):
    data = tmp_path / "data.txt"
    data.write_text(default_text()[:6000])
    out = tmp_path / "pages"
    code = main(
        ["features", "--model", "shakespeare-char", "--sae", SHIPPED, "--data", str(data),
         "--out", str(out), "--n-features", "4", "--k", "5", "--prompt", "ROMEO:"]
    )  # fmt: skip
    assert code == 0
    assert "pages written" in capsys.readouterr().out
    linked = re.findall(r"href='(feature_\d+\.html)'", (out / "prompt_0.html").read_text())
    assert len(linked) >= 6 and all((out / name).exists() for name in linked)
    assert len(list(out.glob("feature_*.html"))) >= 4


@pytest.mark.parametrize(
    "args, message",
    [
        (["--sae", "no-such-sae"], "no shipped SAE of that name"),
        (["--data", "missing.txt"], "cannot read --data 'missing.txt'"),
        (["--sae", "WIDE"], "has d_in=64, but 'blocks.1.hook_resid_post' is 128 wide"),
    ],
)
def test_interp_features_usage_errors(tmp_path, capsys, args, message):
    data = tmp_path / "data.txt"
    data.write_text("ROMEO:\n" * 100)
    wide = SAE(SAEConfig(d_in=64, d_sae=128, hook_name="blocks.1.hook_resid_post"))
    wide.save(tmp_path / "wide")
    base = {"--model": "shakespeare-char", "--sae": SHIPPED, "--data": str(data)}
    base.update(dict(zip(args[::2], args[1::2], strict=True)))
    if base["--sae"] == "WIDE":
        base["--sae"] = str(tmp_path / "wide")
    argv = ["features", *[x for kv in base.items() for x in kv], "--out", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_interp_report_with_sae(tmp_path, capsys):
    out = tmp_path / "report.html"
    argv = ["report", "--model", "shakespeare-char", "--prompt", "ROMEO:\nWhat", "--out", str(out)]
    assert main([*argv, "--sae", SHIPPED]) == 0
    page = out.read_text()
    assert "<section id='sae'>" in page
    links = set(re.findall(r"href='#sae-feature-(\d+)'", page))
    anchors = set(re.findall(r"id='sae-feature-(\d+)'", page))
    assert links == anchors and 0 < len(links) <= 30  # every link has its card
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--sae-data", "x.txt"])
    assert exit_info.value.code == 2 and "--sae-data needs --sae" in capsys.readouterr().err


def test_interp_report_with_sae_on_a_prompt_shorter_than_the_cards_top_k(tmp_path):
    out = tmp_path / "report.html"
    argv = ["report", "--model", "shakespeare-char", "--prompt", "ROMEO:", "--out", str(out)]
    assert main([*argv, "--sae", SHIPPED]) == 0  # 6 tokens; each card keeps its top 10
    page = out.read_text()
    assert "<section id='sae'>" in page and re.search(r"id='sae-feature-\d+'", page)


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")
def test_feature_page_renders_in_chromium(tmp_path):
    model = interp.load_model("shakespeare-char")
    sae = interp.load_sae(SHIPPED)
    windows = text_windows(model, default_text()[:20000])
    stats = top_activations(model, sae, windows, k=8)
    pages = write_feature_pages(model, sae, stats, tmp_path, n_features=2, prompts=["ROMEO:"])
    for page in pages:
        html_tag, body = render_dom(page)
        assert_clean(html_tag)
        if page.name.startswith("feature_"):
            assert body.count('class="main-svg"') >= 1  # the histogram was drawn
            assert body.count('<div class="ctx">') == 8


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium is not installed")
def test_report_with_sae_renders_in_chromium(tmp_path):
    from interp.sae.cli import report_sections
    from interp.viz.report import write_report

    model = interp.load_model("shakespeare-char")
    sections = report_sections(model, "ROMEO:\nWhat say", SHIPPED, None)
    path, _ = write_report(model, "ROMEO:\nWhat say", tmp_path / "r.html", extra_sections=sections)
    html_tag, body = render_dom(path)
    assert_clean(html_tag)
    assert 'id="sae"' in body and body.count('class="feature"') > 5
