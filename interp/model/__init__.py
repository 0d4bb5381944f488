"""The model: ``HookedTransformer``, a transformer whose every activation is a named hook point.

One file a concept: ``hooked_transformer`` (the module and its forward pass), and the mixins
it is built from: ``generation`` (``generate`` with the key/value cache), ``weight_views``
(the stacked weights ``W_Q``... and ``QK``/``OV``), ``constructors`` (``from_pretrained``,
``from_pretrained_no_processing``, ``from_nanogpt``, ``process_weights_``, ``save``) and
``opt_in_hooks`` (the ``set_use_*`` switches); ``loss`` is the next-token loss. Tokens in
and out are ``interp.model.tokenization``.

Example:
    >>> from interp.model import HookedTransformer
    >>> shakespeare = interp.load_model("shakespeare-char")   # shipped: interp.list_models()
    >>> isinstance(shakespeare, HookedTransformer)
    True
    >>> shakespeare.cfg.n_layers, shakespeare.cfg.n_heads, shakespeare.cfg.d_vocab
    (4, 4, 65)
"""

from interp.model.hooked_transformer import HookedTransformer, ReturnType, TextOrTokens
from interp.model.loss import lm_cross_entropy_loss

__all__ = ["HookedTransformer", "ReturnType", "TextOrTokens", "lm_cross_entropy_loss"]
