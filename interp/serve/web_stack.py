"""The web packages the live dashboard runs on (FastAPI, uvicorn), which interp's ``serve``
extra installs: checked before the dashboard starts, so a missing one is named with its fix.

Example:
    >>> require_web_stack()  # None when FastAPI and uvicorn are installed
"""

from __future__ import annotations

import importlib.util

PACKAGES = ("fastapi", "uvicorn")


def require_web_stack() -> None:
    """Raise an ``ImportError`` naming the missing packages and the install line."""
    missing = [name for name in PACKAGES if _missing(name)]
    if missing:
        raise ImportError(
            f"The live dashboard needs {' and '.join(missing)}, which this installation does "
            "not have: pip install 'interp[serve]' (or pip install fastapi uvicorn)."
        )


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ValueError:  # a module set to None in sys.modules (how tests hide a package)
        return True
