"""The pieces of a transformer, one concept a file, each exposing its activations through
hook points. TransformerLens users import them from here (``interp.components.LayerNormPre``).
"""

from interp.components.activations import ACTIVATIONS, affine, gelu_fast
from interp.components.attention import Attention
from interp.components.block import OPT_IN_HOOKS, TransformerBlock
from interp.components.embeddings import Embed, PosEmbed, Unembed
from interp.components.mlp import MLP
from interp.components.moe import Expert, MoE
from interp.components.norms import (
    LayerNorm,
    LayerNormPre,
    RMSNorm,
    RMSNormPre,
    applied_weight,
    make_norm,
)

__all__ = [
    "ACTIVATIONS",
    "MLP",
    "MoE",
    "Expert",
    "OPT_IN_HOOKS",
    "Attention",
    "Embed",
    "LayerNorm",
    "LayerNormPre",
    "PosEmbed",
    "RMSNorm",
    "RMSNormPre",
    "TransformerBlock",
    "Unembed",
    "affine",
    "applied_weight",
    "gelu_fast",
    "make_norm",
]
