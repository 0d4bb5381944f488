"""circuit-tracer's ``replacement_model.replacement_model_transformerlens``: its
TransformerLens backend class is interp's ``ReplacementModel`` (``TransformerLensReplacementModel``
is an alias).

Example:
    >>> from interp.circuits.replacement_model.replacement_model_transformerlens import (
    ...     TransformerLensReplacementModel,
    ... )
"""

from interp.circuits.replacement_model import ReplacementModel, TransformerLensReplacementModel

__all__ = ["ReplacementModel", "TransformerLensReplacementModel"]
