"""The live dashboard: ``interp serve`` (a local FastAPI app over any model interp loads),
its JSON API, its page, and ``interp.serve.dashboard`` for notebooks.

Example:
    >>> from interp.serve import BackgroundServer, create_app
    >>> with BackgroundServer(create_app({"attn-only-2l": model})) as server:
    ...     print(server.url)
"""

from interp.serve.app import create_app
from interp.serve.notebook import Dashboard, dashboard
from interp.serve.server import BackgroundServer

__all__ = ["BackgroundServer", "Dashboard", "create_app", "dashboard"]
