"""circuit-tracer's ``attribution.attribute`` module: ``attribute`` is
``interp.circuits.attribution``'s (one function for every model; circuit-tracer 0.5.0 merged
its two backends' ``attribute`` into this module too).

Example:
    >>> from interp.circuits.attribution.attribute import attribute
"""

from interp.circuits.attribution import attribute

__all__ = ["attribute"]
