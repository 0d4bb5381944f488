"""The live dashboard: ``interp serve`` (a local FastAPI app over any model interp loads),
its JSON API, its page, and ``interp.serve.dashboard`` for notebooks.

Example:
    >>> from interp.serve import BackgroundServer, create_app
    >>> with BackgroundServer(create_app({"attn-only-2l": model})) as server:   # 127.0.0.1
    ...     print(server.url)                  # a free port; the server stops on leaving
    http://127.0.0.1:.../
"""

from interp.serve.app import create_app
from interp.serve.notebook import Dashboard, dashboard
from interp.serve.server import BackgroundServer

__all__ = ["BackgroundServer", "Dashboard", "create_app", "dashboard"]
