"""interp: a mechanistic-interpretability toolkit for GPT-2-family transformers."""

# TransformerLens's module names that are also its class names: the modules are imported
# first, then the names below bind the classes (as transformer_lens's __init__ does), so
# `from interp.HookedTransformer import Loss` and `interp.HookedTransformer(cfg)` both work.
import interp.ActivationCache  # noqa: F401
import interp.HookedTransformer  # noqa: F401
from interp import (
    analysis,
    components,
    evals,
    head_detector,
    hook_points,
    loading_from_pretrained,
    past_key_value_caching,
    patching,
    utils,
)
from interp.analysis import FactoredMatrix
from interp.cache import ActivationCache
from interp.config import HookedTransformerConfig
from interp.hooks import HookedRootModule, HookPoint
from interp.model import HookedTransformer
from interp.past_key_value_caching import (
    HookedTransformerKeyValueCache,
    HookedTransformerKeyValueCacheEntry,
)
from interp.sae.shipped import list_saes, load_sae
from interp.shipped import list_models, load_model
from interp.tokenizers import get_tokenizer

__all__ = [
    "ActivationCache",
    "FactoredMatrix",
    "HookPoint",
    "HookedRootModule",
    "HookedTransformer",
    "HookedTransformerConfig",
    "HookedTransformerKeyValueCache",
    "HookedTransformerKeyValueCacheEntry",
    "analysis",
    "components",
    "evals",
    "get_tokenizer",
    "head_detector",
    "hook_points",
    "list_models",
    "list_saes",
    "load_model",
    "load_sae",
    "loading_from_pretrained",
    "past_key_value_caching",
    "patching",
    "utils",
]
