"""The HTML report for one prompt: tokens, prediction, every layer's attention heads, the
logit lens, head scores and (with a corrupted prompt) a patching heatmap.

The page loads plotly.js and circuitsvis's bundle from ``report_assets/`` beside it (written
once, shared by the reports in a folder; it opens offline), or inlines them once each with
``self_contained=True``. The attention view draws the layer picked in its menu, on demand,
from every layer's patterns stored once in the page (as integers in thousandths).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from interp.analysis.labels import token_label
from interp.model import HookedTransformer
from interp.viz.circuitsvis_view import (
    circuitsvis_bundle_path,
    circuitsvis_script,
    circuitsvis_tokens,
)
from interp.viz.html import escape_text, html_page, script_json
from interp.viz.plots import (
    figure_fragment,
    head_score_grid,
    logit_lens_plot,
    patching_heatmap,
    plotly_script,
)
from interp.viz.report_data import PromptAnalysis, analyse_prompt, top_predictions_by_stage

ASSETS = "report_assets"  # the folder beside a report holding the libraries it loads
# Draws the chosen layer's heads from the page's data: integer thousandths, each query row
# cut to its causal part [0, q] when every pattern is causal (zeros after it restored here).
ATTENTION_SCRIPT = """
(function () {
  const data = JSON.parse(document.getElementById('attention-data').textContent);
  const menu = document.getElementById('attention-layer');
  const n = data.tokens.length;
  function pattern(rows) {
    return rows.map((row) => Array.from({ length: n }, (_, k) => (row[k] || 0) / 1000));
  }
  function draw() {
    const layer = Number(menu.value);
    const view = document.createElement('div');
    view.id = 'attention-view-' + layer + '-' + Date.now();
    document.getElementById('attention-view').replaceChildren(view);
    CircuitsVis.render(view.id, CircuitsVis.AttentionHeads, {
      attention: data.patterns[layer].map(pattern),
      tokens: data.tokens,
      attentionHeadNames: data.patterns[layer].map((_, h) => 'L' + layer + 'H' + h),
    });
    document.getElementById('attention').dataset.drawn = String(layer);
  }
  menu.addEventListener('change', draw);
  draw();
})();
"""


def _token_spans(tokens: Sequence[str]) -> str:
    spans = (
        f"<span class='token'>{escape_text(token_label(token))}<sub>{i}</sub></span>"
        for i, token in enumerate(tokens)
    )
    return f"<div class='tokens'>{''.join(spans)}</div>"


def _table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    head = "".join(f"<th>{escape_text(cell)}</th>" for cell in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape_text(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table class='data'><tr>{head}</tr>{body}</table>"


def _summary_section(analysis: PromptAnalysis) -> str:
    predictions = _table(
        ["next token", "probability"],
        [(repr(token), f"{prob:.3f}") for token, prob in analysis.top_predictions],
    )
    heads = _table(
        ["head kind", "best head", "score"],
        [(kind, head, f"{score:.3f}") for kind, (head, score) in analysis.top_heads().items()],
    )
    return (
        "<section id='summary'><h2>Prompt and prediction</h2>"
        f"{_token_spans(analysis.tokens)}"
        "<p class='note'>Each box is one token (subscript: its position; ␣ is a space, ↵ a "
        "newline).</p>"
        "<div style='display:flex; gap:40px; flex-wrap:wrap'>"
        f"<div><h3>Top next-token predictions</h3>{predictions}</div>"
        f"<div><h3>Top heads on this prompt</h3>{heads}</div></div></section>"
    )


def _pattern_rows(patterns: Sequence[torch.Tensor]) -> list:
    """Every layer's patterns [layer][head][query][key] as integer thousandths, each row cut
    after its query's position when every pattern is causal (the page restores the zeros)."""
    stacked = torch.stack([p.detach().to("cpu", torch.float64) for p in patterns])
    causal = bool((stacked.triu(1) == 0).all())
    ints = (stacked * 1000).round().to(torch.int32).tolist()
    if causal:
        ints = [[[row[: q + 1] for q, row in enumerate(head)] for head in layer] for layer in ints]
    return ints


def _attention_section(analysis: PromptAnalysis) -> str:
    patterns = _pattern_rows(analysis.patterns)
    data = {"tokens": circuitsvis_tokens(analysis.tokens), "patterns": patterns}
    options = "".join(
        f"<option value='{layer}'>{layer}</option>" for layer in range(len(analysis.patterns))
    )
    return (
        "<section id='attention'><h2>Attention heads</h2><p class='note'>Pick a layer; hover "
        "over a head to see its pattern (rows: query tokens, columns: key tokens); click to "
        "lock it. Hover over a token to see where it attends.</p>"
        f"<label>layer <select id='attention-layer'>{options}</select></label>"
        "<div id='attention-view'></div>"
        f"<script type='application/json' id='attention-data'>{script_json(data)}</script>"
        f"<script>{ATTENTION_SCRIPT}</script></section>"
    )


def _logit_lens_section(analysis: PromptAnalysis) -> str:
    lens = analysis.logit_lens
    probs, predictions = top_predictions_by_stage(lens)
    fig = logit_lens_plot(probs, predictions, lens.labels, analysis.tokens)
    return (
        "<section id='logit-lens'><h2>Logit lens</h2><p class='note'>The residual stream "
        "entering each layer (<i>pre</i>), after its attention (<i>mid</i>) and at the end, put "
        "through the final layer norm and unembedding: each cell is the top next-token "
        "prediction at that position and its probability. The last row is the model's output."
        f"</p>{figure_fragment(fig)}</section>"
    )


def _head_score_section(analysis: PromptAnalysis) -> str:
    fig = head_score_grid(analysis.head_scores, title="Head scores on this prompt")
    return (
        "<section id='head-scores'><h2>Head scores</h2><p class='note'>The fraction of each "
        "head's attention that goes to the previous token, to earlier copies of the current "
        "token (duplicate), or to the token after an earlier copy (induction). Duplicate and "
        "induction scores need repeated tokens in the prompt; without any they are 0."
        f"</p>{figure_fragment(fig)}</section>"
    )


def _patching_section(analysis: PromptAnalysis) -> str:
    patching = analysis.patching
    if patching is None:
        return ""
    metric = (
        "normalised logit difference (0 = corrupted run, 1 = clean run)"
        if patching.normalised
        else "logit difference (clean and corrupted runs give the same difference)"
    )
    fig = patching_heatmap(
        patching.results,
        analysis.tokens,
        title="Patching the clean residual stream (resid_pre) into the corrupted run",
        metric_name="normalised logit diff" if patching.normalised else "logit diff",
    )
    return (
        "<section id='patching'><h2>Activation patching</h2>"
        f"<p>Corrupted prompt:</p>{_token_spans(patching.corrupted_tokens)}"
        f"<p>Metric: logit of {escape_text(repr(patching.answer))} minus logit of "
        f"{escape_text(repr(patching.wrong_answer))} at the last position, as a {metric}. "
        f"Clean run: {patching.clean_logit_diff:.3f}; corrupted run: "
        f"{patching.corrupted_logit_diff:.3f}.</p>{figure_fragment(fig)}</section>"
    )


def write_report_assets(folder: str | Path) -> Path:
    """Write plotly.js and circuitsvis's bundle into ``folder`` (``plotly.min.js``,
    ``circuitsvis.js``) unless they are there already; returns the folder.

    Example:
        >>> write_report_assets("reports/report_assets")
    """
    from plotly.offline import get_plotlyjs

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    sources = {
        "plotly.min.js": get_plotlyjs().encode("utf-8"),
        "circuitsvis.js": circuitsvis_bundle_path().read_bytes(),
    }
    for name, content in sources.items():
        target = folder / name
        if not target.is_file() or target.read_bytes() != content:
            target.write_bytes(content)
    return folder


def report_html(
    analysis: PromptAnalysis,
    title: str = "interp report",
    extra_sections: Sequence[str] = (),
    assets: str | None = ASSETS,
) -> str:
    """The report page for an ``analyse_prompt`` result, as one HTML string that loads
    plotly.js and circuitsvis from the relative folder ``assets`` (``write_report_assets``),
    or with ``assets=None`` inlines them, once each.

    Example:
        >>> page = report_html(analyse_prompt(model, "The cat sat on the mat. The cat"))
    """
    warnings = "".join(f"<p class='warning'>{escape_text(w)}</p>" for w in analysis.warnings)
    navigation = " · ".join(
        f"<a href='#{anchor}'>{name}</a>"
        for anchor, name in [
            ("summary", "prediction"),
            ("attention", "attention"),
            ("logit-lens", "logit lens"),
            ("head-scores", "head scores"),
        ]
        + ([("patching", "patching")] if analysis.patching is not None else [])
    )
    body = (
        f"<h1>{escape_text(title)}</h1>"
        f"<p>Model <b>{escape_text(analysis.model_name)}</b> ({escape_text(analysis.model_shape)})"
        f"</p>{warnings}<nav>{navigation}</nav>"
        + _summary_section(analysis)
        + _attention_section(analysis)
        + _logit_lens_section(analysis)
        + _head_score_section(analysis)
        + _patching_section(analysis)
        + "".join(extra_sections)  # trusted markup, e.g. interp.sae.cli.report_sections
    )
    if assets is None:
        head = circuitsvis_script() + "\n" + plotly_script()
    else:
        head = "".join(
            f"<script src='{escape_text(assets)}/{name}'></script>\n"
            for name in ("circuitsvis.js", "plotly.min.js")
        )
    return html_page(title, body, head=head)


def write_report(
    model: HookedTransformer,
    prompt: str,
    path: str | Path,
    corrupted_prompt: str | None = None,
    answer: str | None = None,
    wrong_answer: str | None = None,
    warnings: Sequence[str] = (),
    extra_sections: Sequence[str] = (),
    self_contained: bool = False,
) -> tuple[Path, PromptAnalysis]:
    """Analyse ``prompt`` and write the offline HTML report to ``path``, with the libraries
    it loads in ``report_assets/`` beside it (or, ``self_contained``, inlined in the file).

    ``corrupted_prompt`` (same token length) adds the patching heatmap; ``answer`` and
    ``wrong_answer`` (single tokens) fix its logit difference, which otherwise compares the
    clean and corrupted runs' top predictions. ``warnings`` are shown at the top.

    Example:
        >>> path, analysis = write_report(model, "The cat sat on the mat. The cat", "cat.html")
        >>> analysis.top_heads()["induction"]
    """
    analysis = analyse_prompt(model, prompt, corrupted_prompt, answer, wrong_answer)
    analysis.warnings.extend(warnings)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not self_contained:
        write_report_assets(path.parent / ASSETS)
    assets = None if self_contained else ASSETS
    page = report_html(analysis, extra_sections=extra_sections, assets=assets)
    path.write_text(page, encoding="utf-8")
    return path, analysis


def summary_text(analysis: PromptAnalysis) -> str:
    """A few lines for a terminal: the prediction and the best head of each kind.

    Example:
        >>> print(summary_text(analysis))
    """
    predictions = ", ".join(f"{token!r} {prob:.2f}" for token, prob in analysis.top_predictions)
    lines = [
        f"model: {analysis.model_name} ({analysis.model_shape})",
        f"prompt: {len(analysis.tokens)} tokens; next-token prediction: {predictions}",
    ]
    lines += [
        f"top {kind} head: {head} ({score:.2f})"
        for kind, (head, score) in analysis.top_heads().items()
    ]
    if analysis.patching is not None:
        results = analysis.patching.results
        layer, position = divmod(int(results.abs().argmax()), results.shape[1])
        lines.append(
            f"patching: strongest effect at L{layer}, position {position} "
            f"({analysis.tokens[position]!r}): {float(results[layer, position]):.2f}"
        )
    lines += [f"warning: {warning}" for warning in analysis.warnings]
    return "\n".join(lines)
