"""Offline HTML views of SAE features: a feature page (top contexts coloured by activation,
the logit table, the activation histogram) and a prompt view (the strongest features on each
token, linking to their pages). Every string is escaped (``interp.viz.html``); plotly.js is
inlined, or written once next to a folder of pages.

Example:
    >>> model = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> from interp.sae.features import text_windows, top_activations
    >>> from interp.training.text import default_text
    >>> stats = top_activations(model, sae, text_windows(model, default_text()[:3000]))
    >>> import tempfile
    >>> pages = write_feature_pages(model, sae, stats, tempfile.mkdtemp(), n_features=3,
    ...                             prompts=["ROMEO:"])
    >>> pages[0].name, pages[-1].name   # the index, the feature pages, the prompt's page
    ('index.html', 'prompt_0.html')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import torch

from interp.analysis.labels import token_label
from interp.sae.features import HISTOGRAM_EDGES, FeatureStats, feature_acts, top_logits
from interp.sae.sae import SAE
from interp.viz.html import escape_text, html_page
from interp.viz.plots import figure_fragment, log_axis, plotly_script

FEATURE_STYLE = """<style>
.ctx { font-family: ui-monospace, Menlo, monospace; white-space: pre; margin: 2px 0;
       line-height: 1.7; }
.ctx span { border-radius: 2px; padding: 0 1px; }
.ctx span.top { outline: 2px solid #c60; }
.ctx .value { display: inline-block; width: 5em; color: #555; font-family: system-ui; }
.features a { margin-right: 8px; white-space: nowrap; }
td.tok { font-family: ui-monospace, Menlo, monospace; white-space: pre; }
</style>"""


def visible(token: str) -> str:
    """A token inside running text (a context): newlines and tabs made visible, spaces kept
    (escape it after); a token on its own, as a label, is ``token_label``'s ``␣cat``."""
    return token.replace("\n", "↵").replace("\t", "⇥")


def coloured_tokens_html(
    tokens: Sequence[str], acts: Sequence[float], top: int | None, peak: float
) -> str:
    """Tokens as escaped spans shaded by activation (``peak`` is full colour); ``top`` marked."""
    spans = []
    for i, (token, act) in enumerate(zip(tokens, acts, strict=True)):
        alpha = 0.0 if peak <= 0 else max(0.0, min(1.0, act / peak))
        style = f"background: rgba(255, 120, 0, {alpha:.3f})"
        cls = " class='top'" if i == top else ""
        title = escape_text(f"{token!r}: {act:.3f}")
        spans.append(
            f"<span{cls} style='{style}' title='{title}'>{escape_text(visible(token))}</span>"
        )
    return "".join(spans)


def logit_table_html(logits: dict[str, list[tuple[str, float]]]) -> str:
    """The promoted and suppressed tokens side by side as an escaped HTML table."""
    rows = "".join(
        "<tr>"
        f"<td class='tok'>{escape_text(repr(up))}</td><td>{up_value:+.3f}</td>"
        f"<td class='tok'>{escape_text(repr(down))}</td><td>{down_value:+.3f}</td></tr>"
        for (up, up_value), (down, down_value) in zip(
            logits["promoted"], logits["suppressed"], strict=True
        )
    )
    return (
        "<table class='data'><tr><th>promoted</th><th>weight</th><th>suppressed</th>"
        f"<th>weight</th></tr>{rows}</table>"
    )


def histogram_figure(stats: FeatureStats, feature: int) -> go.Figure:
    """The feature's positive activations over the dataset, in log-spaced bins."""
    edges = HISTOGRAM_EDGES.tolist()
    counts = stats.histogram[feature].tolist()
    first = next((i for i, c in enumerate(counts) if c), 0)
    last = max((i for i, c in enumerate(counts) if c), default=len(counts) - 1)
    centres = [(edges[i] * edges[i + 1]) ** 0.5 for i in range(first, last + 1)]
    fig = go.Figure(go.Bar(x=centres, y=counts[first : last + 1], marker_color="#e67e22"))
    fig.update_layout(
        title=f"Activations of feature {feature} (density {float(stats.density[feature]):.3%})",
        xaxis={"title": "activation", **log_axis(centres)},
        yaxis={"title": "tokens"},
        template="plotly_white",
        height=300,
        margin={"l": 50, "r": 20, "t": 50, "b": 40},
    )
    return fig


def feature_section(
    model: Any,
    sae: SAE,
    stats: FeatureStats,
    feature: int,
    logit_weights: torch.Tensor | None = None,
    n_logits: int = 10,
    anchor: str = "",
) -> str:
    """The HTML fragment for one feature (the page's body; also a report section).

    Args:
        stats: the features' top contexts and statistics (``top_activations``).
        logit_weights: ``feature_logit_weights(model, sae)`` when already computed
            (a folder of pages computes it once); None computes it.
        n_logits: how many promoted and suppressed tokens the logit table shows.
        anchor: the section's HTML id, for links within a report.

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> from interp.sae.features import text_windows, top_activations
        >>> from interp.training.text import default_text
        >>> stats = top_activations(model, sae, text_windows(model, default_text()[:3000]))
        >>> body = feature_section(model, sae, stats, 7)
        >>> body.startswith("<section class='feature'")
        True
    """
    contexts = stats.contexts(feature, model.tokenizer)
    peak = contexts[0]["value"] if contexts else 0.0
    rows = "".join(
        f"<div class='ctx'><span class='value'>{c['value']:.3f}</span>"
        f"{coloured_tokens_html(c['tokens'], c['acts'], c['index'], peak)}</div>"
        for c in contexts
    )
    if not rows:
        rows = "<p class='note'>This feature is active on no token of the dataset.</p>"
    logits = top_logits(model, sae, feature, n_logits, logit_weights)
    density = float(stats.density[feature])
    mean = float(stats.act_sum[feature]) / max(int(stats.fire_count[feature]), 1)
    figure = figure_fragment(histogram_figure(stats, feature)) if contexts else ""
    name = f"{sae.cfg.hook_name} feature {feature}"
    return (
        f"<section class='feature' id='{escape_text(anchor)}'><h2>{escape_text(name)}</h2>"
        f"<p>Active on {density:.3%} of {stats.n_tokens:,} tokens; mean activation when "
        f"active {mean:.3f}; max {peak:.3f}.</p>"
        f"<h3>Top activations</h3><p class='note'>Each line: the feature's activation on the "
        "outlined token, with the context around it; colour shows the activation on each "
        f"token (hover for the value; ↵ is a newline).</p>{rows}"
        "<h3>Logit weights</h3><p class='note'>The tokens this feature's decoder direction "
        "promotes and suppresses directly (through the final layer norm's weight and the "
        f"unembedding).</p>{logit_table_html(logits)}{figure}</section>"
    )


def feature_page_html(
    model: Any,
    sae: SAE,
    stats: FeatureStats,
    feature: int,
    logit_weights: torch.Tensor | None = None,
    plotly_src: str | None = None,
    index_href: str | None = None,
) -> str:
    """A whole feature page. plotly.js is inlined, or loaded from ``plotly_src`` (a relative
    file next to the page: still offline).

    Args:
        logit_weights: ``feature_logit_weights(model, sae)`` when already computed; None
            computes it.
        index_href: the link back to the folder's index page; None: no link.

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> from interp.sae.features import text_windows, top_activations
        >>> from interp.training.text import default_text
        >>> stats = top_activations(model, sae, text_windows(model, default_text()[:3000]))
        >>> import tempfile
        >>> page = Path(tempfile.mkdtemp(), "feature_7.html")
        >>> _ = page.write_text(feature_page_html(model, sae, stats, 7))   # plotly.js inlined
    """
    head = FEATURE_STYLE + "\n" + _plotly_head(plotly_src)
    back = f"<p><a href='{escape_text(index_href)}'>all features</a></p>" if index_href else ""
    body = back + feature_section(model, sae, stats, feature, logit_weights, anchor="feature")
    return html_page(f"{sae.cfg.hook_name} feature {feature}", body, head=head)


def _plotly_head(plotly_src: str | None) -> str:
    if plotly_src is None:
        return plotly_script()
    return f"<script src='{escape_text(plotly_src)}'></script>"


@torch.no_grad()
def prompt_view(
    model: Any,
    sae: SAE,
    prompt: str,
    n_features: int = 5,
    link: Callable[[int], str | None] = lambda f: f"feature_{f}.html",
) -> tuple[str, list[int]]:
    """The strongest ``n_features`` features on each token of ``prompt``, as an HTML table
    with links (``link(feature)``; None: no link), and the features shown, strongest first.

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> fragment, features = prompt_view(model, sae, "ROMEO:")
        >>> fragment.startswith("<table"), features[:3]   # strongest first
        (True, [185, 667, 863])
    """
    tokens = model.to_tokens(prompt)
    strings = model.to_str_tokens(tokens[0])
    acts = feature_acts(model, sae, tokens)[0]  # [pos, d_sae]
    values, indices = acts.topk(min(n_features, acts.shape[-1]), dim=-1)
    shown: dict[int, float] = {}
    rows = []
    for pos, token in enumerate(strings):
        cells = []
        for value, feature in zip(values[pos].tolist(), indices[pos].tolist(), strict=True):
            if value <= 0:
                continue
            shown[feature] = max(shown.get(feature, 0.0), value)
            href = link(feature)
            label = f"#{feature} {value:.2f}"
            cells.append(
                f"<a href='{escape_text(href)}'>{escape_text(label)}</a>"
                if href
                else f"<span>{escape_text(label)}</span>"
            )
        rows.append(
            f"<tr><td>{pos}</td><td class='tok'>{escape_text(token_label(token))}</td>"
            f"<td class='features'>{''.join(cells)}</td></tr>"
        )
    table = (
        "<table class='data'><tr><th>pos</th><th>token</th><th>strongest features "
        f"(activation)</th></tr>{''.join(rows)}</table>"
    )
    return table, sorted(shown, key=shown.get, reverse=True)


def prompt_page_html(sae: SAE, table: str) -> str:
    """A page around ``prompt_view``'s table (whose links go to ``feature_<f>.html``).

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> table, features = prompt_view(model, sae, "ROMEO:")
        >>> import tempfile
        >>> _ = Path(tempfile.mkdtemp(), "prompt.html").write_text(prompt_page_html(sae, table))
    """
    body = (
        f"<h1>Features of {escape_text(sae.cfg.hook_name)} on a prompt</h1>"
        f"<p><a href='index.html'>all features</a></p>{table}"
    )
    return html_page("SAE features on a prompt", body, head=FEATURE_STYLE)


def write_feature_pages(
    model: Any,
    sae: SAE,
    stats: FeatureStats,
    out: str | Path,
    features: Sequence[int] | None = None,
    n_features: int = 50,
    prompts: Sequence[str] = (),
) -> list[Path]:
    """Write ``feature_<f>.html`` for ``features`` (default: the ``n_features`` with the
    largest top activation) and for every feature the prompt views show, ``prompt_<i>.html``
    for each prompt, ``index.html`` and one ``plotly.min.js`` they share, into folder
    ``out``; returns the pages.

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> from interp.sae.features import text_windows, top_activations
        >>> from interp.training.text import default_text
        >>> stats = top_activations(model, sae, text_windows(model, default_text()[:3000]))
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp())
        >>> pages = write_feature_pages(model, sae, stats, out, n_features=2)
        >>> len(pages), (out / "plotly.min.js").is_file()   # index + 2 pages; plotly once
        (3, True)
    """
    from interp.sae.features import feature_logit_weights

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    features = list(stats.most_active(n_features) if features is None else features)
    bad = [f for f in features if not 0 <= f < sae.cfg.d_sae]
    if bad:
        raise ValueError(f"Features {bad} are outside 0..{sae.cfg.d_sae - 1} (d_sae).")
    views = [prompt_view(model, sae, prompt) for prompt in prompts]
    for _, shown in views:  # every feature a prompt view links to gets its page
        features += [f for f in shown if f not in features]
    from plotly.offline import get_plotlyjs

    (out / "plotly.min.js").write_text(get_plotlyjs(), encoding="utf-8")
    weights = feature_logit_weights(model, sae)
    pages = []
    for feature in features:
        page = out / f"feature_{feature}.html"
        html = feature_page_html(model, sae, stats, feature, weights, "plotly.min.js", "index.html")
        page.write_text(html, encoding="utf-8")
        pages.append(page)
    prompt_links = []
    for i, (prompt, (table, _)) in enumerate(zip(prompts, views, strict=True)):
        page = out / f"prompt_{i}.html"
        page.write_text(prompt_page_html(sae, table), encoding="utf-8")
        pages.append(page)
        prompt_links.append(f"<li><a href='{page.name}'>{escape_text(repr(prompt))}</a></li>")
    rows = "".join(
        f"<tr><td><a href='feature_{f}.html'>{f}</a></td><td>{float(stats.density[f]):.3%}</td>"
        f"<td>{float(stats.top_values[f, 0]):.3f}</td>"
        f"<td class='tok'>{escape_text(_top_token(model, stats, f))}</td></tr>"
        for f in features
    )
    prompts_html = f"<h2>Prompts</h2><ul>{''.join(prompt_links)}</ul>" if prompt_links else ""
    body = (
        f"<h1>{escape_text(sae.cfg.hook_name)}: {len(features)} features</h1>"
        f"<p>{stats.n_tokens:,} tokens; L0 {stats.l0:.2f}; dead (never active) "
        f"{stats.dead_fraction:.1%} of {sae.cfg.d_sae} features.</p>{prompts_html}"
        "<h2>Features</h2><table class='data'><tr><th>feature</th><th>density</th>"
        f"<th>max activation</th><th>top token</th></tr>{rows}</table>"
    )
    index = out / "index.html"
    index.write_text(html_page("SAE features", body, head=FEATURE_STYLE), encoding="utf-8")
    return [index, *pages]


def _top_token(model: Any, stats: FeatureStats, feature: int) -> str:
    contexts = stats.contexts(feature, model.tokenizer)
    return token_label(contexts[0]["tokens"][contexts[0]["index"]]) if contexts else ""
