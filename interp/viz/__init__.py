"""Visualization: offline circuitsvis attention views, plotly helpers, the HTML report and the
attribution-graph viewer. (The live dashboard in a notebook is the served app's:
``interp.serve.dashboard``.)"""

from typing import Any

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


def __getattr__(name: str) -> Any:
    if name == "dashboard":  # it was here before the dashboard moved to its app
        raise AttributeError(
            "interp.viz.dashboard is now interp.serve.dashboard (the live dashboard is the "
            "served app, which needs FastAPI and uvicorn: pip install 'interp[serve]')."
        )
    raise AttributeError(f"module 'interp.viz' has no attribute {name!r}")
