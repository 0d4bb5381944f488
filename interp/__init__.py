"""interp: a mechanistic-interpretability toolkit for GPT-2-family transformers."""

from interp import utils
from interp.cache import ActivationCache
from interp.config import HookedTransformerConfig
from interp.hooks import HookedRootModule, HookPoint
from interp.model import HookedTransformer
from interp.tokenizers import get_tokenizer

__all__ = [
    "ActivationCache",
    "HookPoint",
    "HookedRootModule",
    "HookedTransformer",
    "HookedTransformerConfig",
    "get_tokenizer",
    "utils",
]
