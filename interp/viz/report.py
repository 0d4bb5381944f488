"""The self-contained HTML report for one prompt: tokens, prediction, every layer's attention
heads, the logit lens, head scores and (with a corrupted prompt) a patching heatmap.

One file with circuitsvis's and plotly's JavaScript inlined once each: it opens offline.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from interp.model import HookedTransformer
from interp.viz.attention import attention_heads
from interp.viz.circuitsvis_view import circuitsvis_script
from interp.viz.html import escape_text, html_page
from interp.viz.plots import (
    figure_fragment,
    head_score_grid,
    logit_lens_plot,
    patching_heatmap,
    plotly_script,
)
from interp.viz.report_data import PromptAnalysis, analyse_prompt, top_predictions_by_stage


def _token_spans(tokens: Sequence[str]) -> str:
    spans = (
        f"<span class='token'>{escape_text(token.replace(chr(10), '↵'))}<sub>{i}</sub></span>"
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
        "<p class='note'>Each box is one token (subscript: its position; ↵ a newline).</p>"
        "<div style='display:flex; gap:40px; flex-wrap:wrap'>"
        f"<div><h3>Top next-token predictions</h3>{predictions}</div>"
        f"<div><h3>Top heads on this prompt</h3>{heads}</div></div></section>"
    )


def _attention_section(analysis: PromptAnalysis) -> str:
    layers = "".join(
        f"<h3>Layer {layer}</h3>{attention_heads(pattern, analysis.tokens, layer).fragment()}"
        for layer, pattern in enumerate(analysis.patterns)
    )
    return (
        "<section id='attention'><h2>Attention heads</h2><p class='note'>Hover over a head to "
        "see its pattern (rows: query tokens, columns: key tokens); click to lock it. Hover "
        f"over a token to see where it attends.</p>{layers}</section>"
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


def report_html(
    analysis: PromptAnalysis, title: str = "interp report", extra_sections: Sequence[str] = ()
) -> str:
    """The report page for an ``analyse_prompt`` result, as one offline HTML string.

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
    return html_page(title, body, head=circuitsvis_script() + "\n" + plotly_script())


def write_report(
    model: HookedTransformer,
    prompt: str,
    path: str | Path,
    corrupted_prompt: str | None = None,
    answer: str | None = None,
    wrong_answer: str | None = None,
    warnings: Sequence[str] = (),
    extra_sections: Sequence[str] = (),
) -> tuple[Path, PromptAnalysis]:
    """Analyse ``prompt`` and write the offline HTML report to ``path``.

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
    path.write_text(report_html(analysis, extra_sections=extra_sections), encoding="utf-8")
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
