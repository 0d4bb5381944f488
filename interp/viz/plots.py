"""Plotly helpers researchers write in every notebook: heatmaps, lines, scatters, and the
standard interpretability figures (patching results, the logit lens, head scores).

Every function returns a ``plotly.graph_objects.Figure``; ``save_html`` writes figures to one
offline page with plotly.js inlined once, and ``save_image`` writes PNG/SVG where kaleido is
installed. Token labels are escaped (plotly reads ``&lt;`` as a literal ``<``) and kept
apart by position, so repeated tokens never merge into one axis category.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from jaxtyping import Float
from plotly.subplots import make_subplots
from torch import Tensor

from interp.analysis.labels import token_label
from interp.viz.html import escape_text, html_page, inline_script

Array2D = Float[Tensor, "rows cols"] | np.ndarray
DIVERGING_SCALE = "RdBu"  # TransformerLens's choice: negative red, zero white, positive blue
FONT = {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12}


def to_numpy(values: Tensor | np.ndarray | Sequence[float]) -> np.ndarray:
    """A float64 numpy copy of a tensor (any device or dtype), array or list.

    Example:
        >>> to_numpy(torch.ones(2, 3, dtype=torch.bfloat16)).dtype
        dtype('float64')
    """
    if isinstance(values, Tensor):
        return values.detach().to("cpu").double().numpy()
    return np.asarray(values, dtype=np.float64)


def plot_label(text: str) -> str:
    """A token or label as plotly shows it literally: escaped, whitespace made visible.

    Example:
        >>> plot_label("<b>\\n")
        '&lt;b&gt;↵'
    """
    visible = str(text).replace("\n", "↵").replace("\t", "⇥")
    return html.escape(visible, quote=False)


def position_labels(tokens: Sequence[str]) -> list[str]:
    """Axis labels that keep repeated tokens apart: each token (whitespace visible, as
    ``interp.analysis.labels.token_label``) with its position.

    Example:
        >>> position_labels(["<|endoftext|>", " cat", "\\n"])
        ['<|endoftext|>|0', '␣cat|1', '↵|2']
    """
    return [f"{token_label(token)}|{position}" for position, token in enumerate(tokens)]


def visible_position_labels(labels: Sequence[str]) -> list[str]:
    """``"token|position"`` labels (as ``PatchingResult.labels("pos")``) with each token's
    whitespace made visible, as ``position_labels`` writes them.

    Example:
        >>> visible_position_labels([" cat|1", "a|b|2"])
        ['␣cat|1', 'a|b|2']
    """
    return [
        f"{token_label(token)}|{position}"
        for token, _, position in (label.rpartition("|") for label in labels)
    ]


def log_axis(values: Sequence[float]) -> dict:
    """A plotly log axis whose ticks read as numbers: 1, 2, 5 times each power of ten
    between the smallest and largest positive value (only the powers of ten past four
    decades), instead of plotly's default of bare digits ("5 6 7 8 9 1 2 3") on short ranges.

    Example:
        >>> log_axis([0.3, 4.0])["ticktext"]
        ['0.2', '0.5', '1', '2', '5']
    """
    positive = [v for v in values if v > 0]
    if not positive:
        return {"type": "log"}
    low, high = math.log10(min(positive)), math.log10(max(positive))
    steps = (1,) if high - low > 4 else (1, 2, 5)
    ticks = [
        step * 10.0**power
        for power in range(math.floor(low), math.ceil(high) + 1)
        for step in steps
        if low - 0.31 <= math.log10(step * 10.0**power) <= high + 0.31  # half a 1-2-5 step
    ]
    return {"type": "log", "tickvals": ticks, "ticktext": [f"{tick:g}" for tick in ticks]}


def _axis_labels(labels: Sequence[str] | None, size: int, what: str) -> list[str]:
    if labels is None:
        return [str(i) for i in range(size)]
    if len(labels) != size:
        raise ValueError(f"Got {len(labels)} {what} labels for {size} {what} entries.")
    return [plot_label(label) for label in labels]


def _check_2d(values: Array2D) -> np.ndarray:
    array = to_numpy(values)
    if array.ndim != 2:
        raise ValueError(f"Expected a 2-D [rows, cols] tensor, got shape {array.shape}.")
    return array


def _style(fig: go.Figure, title: str, height: int) -> go.Figure:
    fig.update_layout(
        title=plot_label(title),
        template="plotly_white",
        font=FONT,
        height=height,
        margin={"l": 70, "r": 30, "t": 60, "b": 60},
    )
    return fig


def imshow(
    values: Array2D | Mapping[str, Array2D],
    x_labels: Sequence[str] | None = None,
    y_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    title: str = "",
    diverging: bool = True,
    zmin: float | None = None,
    zmax: float | None = None,
    text: Sequence[Sequence[str]] | None = None,
) -> go.Figure:
    """A heatmap of ``values`` [rows, cols] with labelled axes; row 0 at the top.

    ``diverging`` (default) uses a red-white-blue scale centred on zero; otherwise a
    sequential scale from ``zmin`` to ``zmax``. ``text`` [rows][cols] is written in the cells.
    A dict of same-shape matrices (such as ``head_scores``'s) draws one panel per key, side by
    side, on one shared colour scale.

    Example:
        >>> str_tokens = model.to_str_tokens(tokens)
        >>> fig = imshow(cache["pattern", 0][0, 0], x_labels=str_tokens, y_labels=str_tokens,
        ...              x_title="key", y_title="query", title="L0H0", diverging=False)
        >>> fig.data[0].z.shape   # [query_pos, key_pos]
        (21, 21)
        >>> scores = interp.analysis.head_scores(model, tokens)   # {kind: [n_layers, n_heads]}
        >>> fig = imshow(scores, x_title="head", y_title="layer")
        >>> len(fig.data)   # one panel per kind of head
        3
    """
    panels = _panels(values)
    rows, cols = next(iter(panels.values())).shape
    x_text = _axis_labels(x_labels, cols, "column")
    y_text = _axis_labels(y_labels, rows, "row")
    hover = [[f"{y_text[r]} / {x_text[c]}" for c in range(cols)] for r in range(rows)]
    scale = {"colorscale": DIVERGING_SCALE, "cmid": 0.0} if diverging else {"colorscale": "Blues"}
    cell_text = [[plot_label(cell) for cell in row] for row in text] if text is not None else None
    fig = make_subplots(
        rows=1,
        cols=len(panels),
        subplot_titles=[plot_label(name) for name in panels] if len(panels) > 1 else None,
        horizontal_spacing=0.08,
    )
    for column, array in enumerate(panels.values(), start=1):
        heatmap = go.Heatmap(
            z=np.where(np.isfinite(array), array, np.nan),
            x=list(range(cols)),
            y=list(range(rows)),
            coloraxis="coloraxis",
            customdata=hover,
            hovertemplate="%{customdata}<br>value: %{z:.4g}<extra></extra>",
            text=cell_text,
            texttemplate="%{text}" if text is not None else None,
            textfont={"size": 10},
        )
        fig.add_trace(heatmap, row=1, col=column)
        fig.update_xaxes(
            tickvals=list(range(cols)),
            ticktext=x_text,
            title=x_title,
            tickangle=-45,
            row=1,
            col=column,
        )
        fig.update_yaxes(
            tickvals=list(range(rows)),
            ticktext=y_text,
            title=y_title if column == 1 else "",
            autorange="reversed",
            row=1,
            col=column,
        )
    fig.update_layout(coloraxis={"cmin": zmin, "cmax": zmax, **scale})
    row_height = 44 if text is not None else 28  # room for the cell text
    return _style(fig, title, height=min(max(200 + row_height * rows, 360), 900))


def _panels(values: Array2D | Mapping[str, Array2D]) -> dict[str, np.ndarray]:
    """``imshow``'s matrices by panel name: one unnamed panel, or one per key of a dict."""
    if isinstance(values, tuple) and values and isinstance(values[0], Mapping):
        raise TypeError(
            f"imshow got a tuple of ({', '.join(type(v).__name__ for v in values)}), such as "
            "head_scores(..., return_labels=True) returns; pass its dict: "
            "scores, labels = head_scores(...); imshow(scores)."
        )
    if not isinstance(values, Mapping):
        return {"": _check_2d(values)}
    if not values:
        raise ValueError("imshow got an empty dict; pass a 2-D tensor or a dict of them.")
    panels = {}
    for name, array in values.items():
        if not isinstance(array, (Tensor, np.ndarray)):
            raise TypeError(
                f"imshow got a dict whose {name!r} entry is a {type(array).__name__}, not a "
                f"tensor; pass one 2-D entry, e.g. imshow(values[{name!r}]) for one of the keys "
                f"{list(values)}."
            )
        panels[str(name)] = _check_2d(array)
    shapes = {name: array.shape for name, array in panels.items()}
    if len(set(shapes.values())) > 1:
        raise ValueError(
            f"imshow draws a dict's matrices side by side, which needs one shape; got {shapes}. "
            f"Pass one of them, e.g. imshow(values[{next(iter(shapes))!r}])."
        )
    return panels


def line(
    values: Float[Tensor, " n"] | Float[Tensor, "n_lines n"] | np.ndarray,
    x_labels: Sequence[str] | None = None,
    line_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    title: str = "",
) -> go.Figure:
    """One line per row of ``values`` ([n] or [n_lines, n]), named by ``line_labels``.

    Example:
        >>> loss_per_token = model(tokens, return_type="loss", loss_per_token=True)   # [1, pos - 1]
        >>> fig = line(loss_per_token[0], x_labels=model.to_str_tokens(tokens)[1:],
        ...            y_title="loss", title="Per-token loss")
        >>> len(fig.data), len(fig.data[0].y)
        (1, 20)
    """
    array = to_numpy(values)
    if array.ndim == 1:
        array = array[None]
    if array.ndim != 2:
        raise ValueError(f"line() takes [n] or [n_lines, n] values, got shape {array.shape}.")
    x_text = _axis_labels(x_labels, array.shape[1], "x")
    names = _axis_labels(line_labels, array.shape[0], "line")
    fig = go.Figure(
        [
            go.Scatter(
                x=list(range(array.shape[1])),
                y=row,
                name=name,
                mode="lines+markers",
                customdata=x_text,
                hovertemplate="%{customdata}: %{y:.4g}",
            )
            for row, name in zip(array, names, strict=True)
        ]
    )
    fig.update_xaxes(tickvals=list(range(array.shape[1])), ticktext=x_text, title=x_title)
    fig.update_yaxes(title=y_title)
    fig.update_layout(showlegend=array.shape[0] > 1)
    return _style(fig, title, height=420)


def scatter(
    x: Float[Tensor, " n"] | np.ndarray,
    y: Float[Tensor, " n"] | np.ndarray,
    point_labels: Sequence[str] | None = None,
    x_title: str = "",
    y_title: str = "",
    title: str = "",
) -> go.Figure:
    """A scatter of ``y`` against ``x`` (both [n]); hovering a point shows its label.

    Example:
        >>> scores = interp.analysis.head_scores(model, tokens)   # [n_layers, n_heads] each
        >>> fig = scatter(scores["previous_token_head"].flatten(),
        ...               scores["induction_head"].flatten(), point_labels=["L0H0", "L1H0"],
        ...               x_title="previous-token score", y_title="induction score")
        >>> list(fig.data[0].customdata)   # shown on hover
        ['L0H0', 'L1H0']
    """
    x_values, y_values = to_numpy(x).ravel(), to_numpy(y).ravel()
    if x_values.shape != y_values.shape:
        raise ValueError(f"x and y differ in size: {x_values.size} vs {y_values.size}.")
    labels = _axis_labels(point_labels, x_values.size, "point")
    fig = go.Figure(
        go.Scatter(
            x=x_values,
            y=y_values,
            mode="markers",
            customdata=labels,
            hovertemplate="%{customdata}<br>x: %{x:.4g}<br>y: %{y:.4g}<extra></extra>",
        )
    )
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return _style(fig, title, height=460)


def patching_heatmap(
    results: Float[Tensor, "n_layers pos"] | np.ndarray,
    tokens: Sequence[str],
    title: str = "Activation patching",
    metric_name: str = "patched metric",
) -> go.Figure:
    """A layer x position patching result with the prompt's tokens on the x axis.

    Example:
        >>> corrupted = tokens.clone()
        >>> corrupted[0, 11:] = corrupted[0, 1:11].flip(0)   # the repeat in reverse order
        >>> def metric(logits):   # the logit of the token that followed the last one before
        ...     return logits[0, -1, tokens[0, 1]]
        >>> results = interp.patching.get_act_patch_resid_pre(model, corrupted, cache, metric,
        ...                                                   progress=False)
        >>> fig = patching_heatmap(results, model.to_str_tokens(tokens))
        >>> fig.data[0].z.shape   # [n_layers, pos]
        (2, 21)
    """
    array = _check_2d(results)
    fig = imshow(
        array,
        x_labels=position_labels(tokens),
        y_labels=[f"L{layer}" for layer in range(array.shape[0])],
        x_title="position (token|index)",
        y_title="layer",
        title=title,
    )
    fig.update_layout(coloraxis_colorbar={"title": plot_label(metric_name)})
    return fig


def logit_lens_plot(
    top_probs: Float[Tensor, "n_stages pos"] | np.ndarray,
    top_tokens: Sequence[Sequence[str]],
    stage_labels: Sequence[str],
    tokens: Sequence[str],
    title: str = "Logit lens: top prediction at each depth",
) -> go.Figure:
    """The top next-token prediction (written in the cell) and its probability (colour) at
    every position after every stage of the residual stream (e.g. entering each layer).

    ``top_probs`` [n_stages, pos]; ``top_tokens`` [n_stages][pos] strings.

    Example:
        >>> lens = interp.analysis.logit_lens(model, tokens, incl_mid=False)
        >>> probs = lens.top_probs[:, 0, :, 0]                          # [n_stages, pos]
        >>> predictions = [[model.tokenizer.token_str(i) for i in row]
        ...                for row in lens.top_tokens[:, 0, :, 0].tolist()]
        >>> fig = logit_lens_plot(probs, predictions, lens.labels, model.to_str_tokens(tokens))
        >>> lens.labels, fig.data[0].z.shape
        (['0_pre', '1_pre', 'final_post'], (3, 21))
    """
    array = _check_2d(top_probs)
    fig = imshow(
        array,
        x_labels=position_labels(tokens),
        y_labels=stage_labels,
        x_title="position (token|index)",
        y_title="residual stream",
        title=title,
        diverging=False,
        zmin=0.0,
        zmax=1.0,
        text=[[token_label(token) for token in row] for row in top_tokens],
    )
    fig.update_layout(coloraxis_colorbar={"title": "top-1 prob"})
    return fig


def head_score_grid(
    scores: Mapping[str, Float[Tensor, "n_layers n_heads"] | np.ndarray],
    title: str = "Head scores",
) -> go.Figure:
    """One layer x head heatmap per score kind (e.g. previous-token, induction), side by
    side, on a shared 0-1 scale; NaN cells (score undefined for the prompt) stay blank.

    Example:
        >>> scores = interp.analysis.head_scores(model, tokens)   # [n_layers, n_heads] each
        >>> fig = head_score_grid({"previous token": scores["previous_token_head"],
        ...                        "induction": scores["induction_head"]})
        >>> len(fig.data)   # one panel per kind
        2
    """
    if not scores:
        raise ValueError("head_score_grid needs at least one score matrix.")
    arrays = {name: _check_2d(values) for name, values in scores.items()}
    n_layers, n_heads = next(iter(arrays.values())).shape
    fig = make_subplots(
        rows=1,
        cols=len(arrays),
        subplot_titles=[plot_label(name) for name in arrays],
        horizontal_spacing=0.08,
    )
    for column, (name, array) in enumerate(arrays.items(), start=1):
        if array.shape != (n_layers, n_heads):
            raise ValueError(f"Score {name!r} has shape {array.shape}, not {(n_layers, n_heads)}.")
        fig.add_trace(
            go.Heatmap(
                z=array,
                x=list(range(n_heads)),
                y=list(range(n_layers)),
                zmin=0.0,
                zmax=1.0,
                colorscale="Blues",
                showscale=column == len(arrays),
                name=plot_label(name),
                text=[[f"{v:.2f}" if np.isfinite(v) else "" for v in row] for row in array],
                texttemplate="%{text}",
                hovertemplate="L%{y}H%{x}: %{z:.3f}<extra>" + plot_label(name) + "</extra>",
            ),
            row=1,
            col=column,
        )
        fig.update_xaxes(title="head", tickvals=list(range(n_heads)), row=1, col=column)
        fig.update_yaxes(
            title="layer" if column == 1 else "",
            tickvals=list(range(n_layers)),
            ticktext=[f"L{layer}" for layer in range(n_layers)],
            autorange="reversed",
            row=1,
            col=column,
        )
    return _style(fig, title, height=min(240 + 40 * n_layers, 700))


def plotly_script() -> str:
    """A ``<script>`` element with plotly.js (about 4.5 MB), to put once in a page's head.

    Example:
        >>> page_head = plotly_script()
        >>> page_head.startswith("<script>"), len(page_head) > 1_000_000
        (True, True)
    """
    from plotly.offline import get_plotlyjs

    return inline_script(get_plotlyjs())


def figure_fragment(fig: go.Figure) -> str:
    """The ``<div>`` and script for one figure, for a page that already holds ``plotly_script()``.

    Example:
        >>> figures = [line(torch.arange(3.0)), line(torch.ones(3))]
        >>> body = "".join(figure_fragment(fig) for fig in figures)
        >>> body.count("<div class='figure'>")
        2
    """
    config = {"responsive": True, "displaylogo": False}
    markup = pio.to_html(fig, include_plotlyjs=False, full_html=False, config=config)
    return f"<div class='figure'>{markup}</div>"


def save_html(figures: go.Figure | Sequence[go.Figure], path: str | Path, title: str = "") -> Path:
    """Write one or more figures to a single offline HTML page (plotly.js inlined once).

    Example:
        >>> import tempfile
        >>> fig_a, fig_b = line(torch.arange(3.0)), line(torch.ones(3))
        >>> save_html([fig_a, fig_b], Path(tempfile.mkdtemp()) / "figures.html",
        ...           title="Two lines").name
        'figures.html'
    """
    figures = [figures] if isinstance(figures, go.Figure) else list(figures)
    body = f"<h1>{escape_text(title)}</h1>\n" if title else ""
    body += "\n".join(figure_fragment(fig) for fig in figures)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(html_page(title or "Figures", body, head=plotly_script()), encoding="utf-8")
    return path


def save_image(fig: go.Figure, path: str | Path, scale: float = 2.0) -> Path:
    """Write ``fig`` as PNG, SVG or PDF (by the file suffix) with kaleido, if installed.

    Example:
        >>> save_image(line(torch.arange(3.0)), "line.png")  # needs kaleido  # doctest: +SKIP
    """
    path = Path(path)
    try:
        import kaleido  # noqa: F401
    except ImportError as error:
        raise RuntimeError(
            "Saving figures as images needs kaleido, which is not installed: "
            "`pip install kaleido` (it drives a Chromium), or use save_html for an offline page."
        ) from error
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.write_image(str(path), scale=scale)
    return path
