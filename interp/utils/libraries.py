"""Whether an optional library can be imported, without importing it."""

from __future__ import annotations

import importlib.util
import sys


def is_library_available(name: str) -> bool:
    """True when ``name`` is already imported or importable (found on the path; not imported,
    so a broken or heavy library costs nothing), as TransformerLens's ``is_library_available``.

    Example:
        >>> is_library_available("torch"), is_library_available("no_such_library")
        (True, False)
    """
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing, or a bad name
        return False
