"""Attribution graphs that explain attention: head loadings (which heads carry an edge) and
QK attributions (why a head attends where it does), on the frozen replacement model."""

from interp.circuits.attention.annotations import AttentionAnnotations, annotate_attention
from interp.circuits.attention.frozen import FrozenRun
from interp.circuits.attention.head_loadings import HeadLoadings, head_loadings
from interp.circuits.attention.qk_attribution import QKAttribution, qk_attribution

__all__ = [
    "AttentionAnnotations",
    "FrozenRun",
    "HeadLoadings",
    "QKAttribution",
    "annotate_attention",
    "head_loadings",
    "qk_attribution",
]
