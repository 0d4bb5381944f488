"""The live dashboard: ``interp serve`` (a local FastAPI app over any model interp loads),
its JSON API, its page, and ``interp.serve.dashboard`` for notebooks.

Example:
    >>> from interp.serve import BackgroundServer, create_app
    >>> with BackgroundServer(create_app({"attn-only-2l": model})) as server:   # 127.0.0.1
    ...     print(server.url)                  # a free port; the server stops on leaving
    http://127.0.0.1:.../
"""

import importlib
from typing import Any

from interp.serve.web_stack import require_web_stack

# Read on first use, so that importing interp.serve (as the `interp` command does for its
# subcommand) needs no web package; using one names what is missing.
_HOMES = {
    "BackgroundServer": "interp.serve.server",
    "Dashboard": "interp.serve.notebook",
    "create_app": "interp.serve.app",
    "dashboard": "interp.serve.notebook",
}
__all__ = ["BackgroundServer", "Dashboard", "create_app", "dashboard", "require_web_stack"]


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'interp.serve' has no attribute {name!r}")
    require_web_stack()
    return getattr(importlib.import_module(_HOMES[name]), name)
