"""The HTML report for one prompt: tokens, prediction, every layer's attention heads, the
logit lens, head scores and (with a corrupted prompt) a patching heatmap.

The page loads its two scripts (plotly.js's cartesian bundle, interp's canvas attention view,
from ``interp/viz/static``) from ``report_assets/`` beside it (written once, shared by the
reports in a folder; it opens offline), or inlines them once each with
``self_contained=True``. The attention view draws the layer picked in its menu, on demand,
from every layer's patterns stored once in the page (as integers in thousandths).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import plotly.graph_objects as go
import torch

from interp.analysis import HEAD_THRESHOLD
from interp.analysis.labels import token_label
from interp.model import HookedTransformer
from interp.viz.html import escape_text, html_page, inline_script, script_json
from interp.viz.plots import figure_fragment, head_score_grid, logit_lens_plot, patching_heatmap
from interp.viz.report_data import (
    PromptAnalysis,
    analyse_prompt,
    patching_gap_warning,
    top_predictions_by_stage,
)

ASSETS = "report_assets"  # the folder beside a report holding the scripts it loads
STATIC = Path(__file__).parent / "static"
# plotly.js's cartesian bundle (heatmaps, bars, lines: every figure a report draws; 1.5 MB
# against the full bundle's 4.8 MB) and interp's canvas attention view, as the page loads them.
SCRIPTS = ("plotly-cartesian.min.js", "attention.js")
# Draws the chosen layer's heads from the page's data: integer thousandths, each query row
# cut to its causal part [0, q] when every pattern is causal (the zeros after it restored).
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
    InterpAttention.heads(document.getElementById('attention-view'), {
      tokens: data.tokens,
      patterns: data.patterns[layer].map(pattern),
      names: data.patterns[layer].map((_, h) => 'L' + layer + 'H' + h),
    });
    document.getElementById('attention').dataset.drawn = String(layer);
  }
  menu.addEventListener('change', draw);
  draw();
})();
"""


def _figure(fig: go.Figure) -> str:
    """``figure_fragment`` with the figure's template cut to its layout and the trace types the
    figure draws: plotly.js reads a whole template (defaults for every trace type) on each
    plot, which took most of a heatmap's drawing time. The figure looks the same."""
    template = fig.layout.template
    used = {trace.type for trace in fig.data}
    defaults = {kind: getattr(template.data, kind) for kind in used if getattr(template.data, kind)}
    fig.layout.template = go.layout.Template(layout=template.layout, data=defaults)
    return figure_fragment(fig)


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
        [
            (kind, best[0], f"{best[1]:.3f}")
            if best
            else (kind, f"no head above {HEAD_THRESHOLD}", "")
            for kind, best in analysis.top_heads().items()
        ],
    )
    return (
        "<section id='summary'><h2>Prompt and prediction</h2>"
        f"{_token_spans(analysis.tokens)}"
        "<p class='note'>Each box is one token (subscript: its position; ␣ is a space, ↵ a "
        "newline).</p>"
        "<div style='display:flex; gap:40px; flex-wrap:wrap'>"
        f"<div><h3>Top next-token predictions</h3>{predictions}</div>"
        f"<div><h3>Top heads on this prompt</h3>{heads}<p class='note'>A head is named at a "
        f"score of {HEAD_THRESHOLD} or more; an induction head only after a previous-token "
        "head in an earlier layer (so none in layer 0).</p></div></div></section>"
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
    data = {"tokens": list(analysis.tokens), "patterns": patterns}
    options = "".join(
        f"<option value='{layer}'>{layer}</option>" for layer in range(len(analysis.patterns))
    )
    return (
        "<section id='attention'><h2>Attention heads</h2><p class='note'>Pick a layer and "
        "click a head to see its pattern (rows: query tokens, columns: key tokens; darker is "
        "more attention); hover over a cell for its tokens and value (␣ a space, ↵ a newline)."
        "</p>"
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
        f"</p>{_figure(fig)}</section>"
    )


def _head_score_section(analysis: PromptAnalysis) -> str:
    fig = head_score_grid(analysis.head_scores, title="Head scores on this prompt")
    return (
        "<section id='head-scores'><h2>Head scores</h2><p class='note'>The fraction of each "
        "head's attention that goes to the previous token, to earlier copies of the current "
        "token (duplicate), or to the token after an earlier copy (induction). Duplicate and "
        "induction scores need repeated tokens in the prompt; without any they are 0. The "
        "map shows every head's score; the summary names a head only at "
        f"{HEAD_THRESHOLD} or more, and an induction head only in a layer after a "
        "previous-token head (a layer-0 head has no earlier layer to read it from)."
        f"</p>{_figure(fig)}</section>"
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
    gap = patching_gap_warning(patching.clean_logit_diff, patching.corrupted_logit_diff)
    return (
        "<section id='patching'><h2>Activation patching</h2>"
        f"<p>Corrupted prompt:</p>{_token_spans(patching.corrupted_tokens)}"
        f"<p>Metric: logit of {escape_text(repr(patching.answer))} minus logit of "
        f"{escape_text(repr(patching.wrong_answer))} at the last position, as a {metric}. "
        f"Clean run: {patching.clean_logit_diff:.3f}; corrupted run: "
        f"{patching.corrupted_logit_diff:.3f}.</p>"
        + (f"<p class='warning'>{escape_text(gap)}</p>" if gap else "")
        + f"{_figure(fig)}</section>"
    )


def write_report_assets(folder: str | Path) -> Path:
    """Write the scripts a report loads (``SCRIPTS``) into ``folder`` unless they are there
    already; returns the folder.

    Example:
        >>> import tempfile
        >>> folder = write_report_assets(Path(tempfile.mkdtemp()) / "report_assets")
        >>> sorted(p.name for p in folder.iterdir()) == sorted(SCRIPTS)
        True
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in SCRIPTS:
        content = (STATIC / name).read_bytes()
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
    """The report page for an ``analyse_prompt`` result, as one HTML string that loads its
    scripts (plotly.js's cartesian bundle, the attention view) from the relative folder
    ``assets`` (``write_report_assets``), or with ``assets=None`` inlines them, once each.

    Example:
        >>> page = report_html(analyse_prompt(model, "7 12 305 9 44 7 12 305 9"))
        >>> page.startswith("<!DOCTYPE html>"), "report_assets/" in page
        (True, True)
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
        head = "\n".join(inline_script((STATIC / name).read_text("utf-8")) for name in SCRIPTS)
    else:
        folder = escape_text(assets)
        head = "".join(f"<script src='{folder}/{name}'></script>\n" for name in SCRIPTS)
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
    """Analyse ``prompt`` and write the offline HTML report to ``path``, with the scripts it
    loads in ``report_assets/`` beside it (or, ``self_contained``, inlined in the file).

    ``corrupted_prompt`` (same token length) adds the patching heatmap; ``answer`` and
    ``wrong_answer`` (single tokens) fix its logit difference, which otherwise compares the
    clean and corrupted runs' top predictions. ``warnings`` are shown at the top.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())   # attn-only-2l reads numbers: a repeat follows
        >>> path, analysis = write_report(model, "7 12 305 9 44 7 12 305 9", folder / "r.html")
        >>> sorted(p.name for p in folder.iterdir())
        ['r.html', 'report_assets']
        >>> analysis.top_heads()["induction"]   # (head, fraction of attention on the repeat)
        ('L1H0', 0.40)
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
        >>> analysis = analyse_prompt(model, "7 12 305 9 44 7 12 305 9")
        >>> print(summary_text(analysis))
        model: attn-only-2l (2 layers, 1 head per layer, d_model=128, attention-only, d_vocab=512)
        prompt: 10 tokens; next-token prediction: '44' 1.00, ...
        top previous token head: L0H0 (0.88)
        top duplicate token head: none (no head above 0.3)
        top induction head: L1H0 (0.40)
    """
    predictions = ", ".join(f"{token!r} {prob:.2f}" for token, prob in analysis.top_predictions)
    lines = [
        f"model: {analysis.model_name} ({analysis.model_shape})",
        f"prompt: {len(analysis.tokens)} tokens; next-token prediction: {predictions}",
    ]
    lines += [
        f"top {kind} head: "
        + (f"{best[0]} ({best[1]:.2f})" if best else f"none (no head above {HEAD_THRESHOLD})")
        for kind, best in analysis.top_heads().items()
    ]
    if analysis.patching is not None:
        results = analysis.patching.results
        layer, position = divmod(int(results.abs().argmax()), results.shape[1])
        ill_conditioned = patching_gap_warning(
            analysis.patching.clean_logit_diff, analysis.patching.corrupted_logit_diff
        )
        lines.append(
            f"patching: strongest effect at L{layer}, position {position} "
            f"({analysis.tokens[position]!r}): {float(results[layer, position]):.2f}"
            + (" (ill-conditioned metric: see the warning)" if ill_conditioned else "")
        )
    lines += [f"warning: {warning}" for warning in analysis.warnings]
    return "\n".join(lines)
