"""circuit-tracer's ``replacement_model.replacement_model`` module: ``ReplacementModel`` (and
``from_config`` / ``from_pretrained``, whose ``backend`` may be either of circuit-tracer's:
interp runs both on its own model)."""

from interp.circuits.replacement_model import ReplacementModel

__all__ = ["ReplacementModel"]
