"""interp: a mechanistic-interpretability toolkit for GPT-2-family transformers."""

from interp import analysis, hook_points, patching, utils
from interp.analysis import FactoredMatrix
from interp.cache import ActivationCache
from interp.config import HookedTransformerConfig
from interp.hooks import HookedRootModule, HookPoint
from interp.model import HookedTransformer
from interp.models import list_models, load_model
from interp.tokenizers import get_tokenizer

__all__ = [
    "ActivationCache",
    "FactoredMatrix",
    "HookPoint",
    "HookedRootModule",
    "HookedTransformer",
    "HookedTransformerConfig",
    "analysis",
    "get_tokenizer",
    "hook_points",
    "list_models",
    "load_model",
    "patching",
    "utils",
]
