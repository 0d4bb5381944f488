"""What an SAE's features do: top-activating contexts, density, logit weights, DLA,
attribution (activation x gradient) and exact feature patching.

Feature activations are read by caching the SAE's input hook (the forward stops there) and
encoding it, so mining a dataset never runs the layers after the SAE. Exact feature
patching uses ``interp.patching``'s batched engine: with the error term, changing feature
``f`` at position ``p`` by ``d`` adds ``d * W_dec[f]`` to the SAE's output hook at ``p``,
which is an ordinary activation patch.

One module a concept: ``activations`` (text windows, feature activations), ``mining`` (top
contexts and statistics), ``logit_effects`` (directions, logit weights, DLA),
``attribution`` (activation x gradient) and ``patching`` (exact feature patching). Every
name is importable from here.

Example:
    >>> model = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> from interp.training.text import default_text
    >>> text = default_text()[:3000]                     # tiny-shakespeare's first lines
    >>> stats = top_activations(model, sae, text_windows(model, text), k=5)
    >>> "".join(stats.contexts(7, model.tokenizer)[0]["tokens"])   # feature 7's strongest
    " we'll have corn at o"
    >>> model.to_str_tokens(feature_logit_weights(model, sae)[7].topk(5).indices)  # promotes
    ['y', 'm', 's', 'Y', 'N']
"""

from interp.sae.features.activations import feature_acts, text_windows
from interp.sae.features.attribution import feature_attribution, spearman
from interp.sae.features.logit_effects import (
    feature_directions,
    feature_dla,
    feature_logit_weights,
    top_logit_tokens,
    top_logits,
)
from interp.sae.features.mining import HISTOGRAM_EDGES, FeatureStats, top_activations
from interp.sae.features.patching import feature_patch

__all__ = [
    "HISTOGRAM_EDGES",
    "FeatureStats",
    "feature_acts",
    "feature_attribution",
    "feature_directions",
    "feature_dla",
    "feature_logit_weights",
    "feature_patch",
    "spearman",
    "text_windows",
    "top_activations",
    "top_logit_tokens",
    "top_logits",
]
