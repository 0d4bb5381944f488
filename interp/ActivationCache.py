"""TransformerLens's ``transformer_lens.ActivationCache`` module name, for scripts ported by
import (``from interp.ActivationCache import ActivationCache``).

``interp.ActivationCache`` itself is the class (as in TransformerLens); this module is
reached by ``from interp.ActivationCache import ...``.

Example:
    >>> from interp.ActivationCache import ActivationCache
    >>> ActivationCache is interp.ActivationCache
    True
"""

from interp.cache import ActivationCache

__all__ = ["ActivationCache"]
