"""The class the loaders build (``HookedTransformer``): handed to them, not imported.

``interp.model`` sits above ``interp.loading`` in the package's layers (an import-linter
contract in pyproject.toml): ``HookedTransformer.from_pretrained`` and the other constructors
call the loaders, so the loaders cannot import ``HookedTransformer`` back. ``interp.model``
hands them the class once it is defined (``set_model_class``), and ``build_model`` and
``load_native`` build ``model_class()(cfg, tokenizer=...)``.

Example:
    >>> from interp.model import HookedTransformer
    >>> set_model_class(HookedTransformer)   # what interp.model does on import
    >>> model_class()(model.cfg, tokenizer=model.tokenizer).cfg.n_layers
    2
"""

from __future__ import annotations

from torch import nn

_model_class: type[nn.Module] | None = None


def set_model_class(model_class: type[nn.Module]) -> None:
    """Make ``model_class`` (called as ``model_class(cfg, tokenizer=...)``) what the loaders
    build."""
    global _model_class
    if not (isinstance(model_class, type) and issubclass(model_class, nn.Module)):
        raise TypeError(
            f"set_model_class takes a torch.nn.Module subclass such as HookedTransformer, "
            f"got {model_class!r}."
        )
    _model_class = model_class


def model_class() -> type[nn.Module]:
    """The class the loaders build; ``interp.model`` sets it when imported."""
    if _model_class is None:
        raise RuntimeError(
            "No model class to load into: import interp.model (or interp) before calling the "
            "loaders in interp.loading."
        )
    return _model_class
