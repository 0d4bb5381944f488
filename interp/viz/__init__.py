"""Visualization: offline circuitsvis attention views, plotly helpers, the HTML report and the
attribution-graph viewer."""

from interp.serve.notebook import dashboard
from interp.viz.activations import token_activations
from interp.viz.attention import attention_heads, attention_pattern
from interp.viz.circuitsvis_view import CircuitsVisView
from interp.viz.graph_view import GraphView
from interp.viz.plots import (
    head_score_grid,
    imshow,
    line,
    logit_lens_plot,
    patching_heatmap,
    save_html,
    save_image,
    scatter,
)
from interp.viz.report import report_html, write_report

__all__ = [
    "CircuitsVisView",
    "GraphView",
    "attention_heads",
    "attention_pattern",
    "dashboard",
    "head_score_grid",
    "imshow",
    "line",
    "logit_lens_plot",
    "patching_heatmap",
    "report_html",
    "save_html",
    "save_image",
    "scatter",
    "token_activations",
    "write_report",
]
