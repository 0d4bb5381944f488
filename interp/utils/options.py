"""Choosing between a default and an optional override, as TransformerLens's utils do."""

from __future__ import annotations

from typing import Any

# TransformerLens's marker for "use the model's default" in optional arguments.
USE_DEFAULT_VALUE = None


def override_or_use_default_value(default_flag: Any, override: Any = None) -> Any:
    """``override`` when it is not None, else ``default_flag`` (False and 0 are overrides).

    Example:
        >>> override_or_use_default_value(model.cfg.default_prepend_bos, override=False)
        False
    """
    return default_flag if override is None else override
