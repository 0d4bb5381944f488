"""``interp.serve.dashboard(model)``: the live dashboard inside a notebook, served from a
background thread on a free 127.0.0.1 port and shown in an IFrame."""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

from interp.model import HookedTransformer
from interp.serve.server import BackgroundServer


class Dashboard:
    """A running dashboard: ``url``, ``stop()`` (frees the port), and an IFrame in a notebook.

    Example:
        >>> board = interp.serve.dashboard(model, prompt="1 2 3 1 2")   # on 127.0.0.1
        >>> board          # in a notebook: the page, in an IFrame
        Dashboard('http://127.0.0.1:.../', running)
        >>> board.stop(); board
        Dashboard('http://127.0.0.1:.../', stopped)
    """

    def __init__(self, server: BackgroundServer, start_url: str, height: int) -> None:
        self.server, self.start_url, self.height = server, start_url, height

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def port(self) -> int | None:
        return self.server.port

    @property
    def running(self) -> bool:
        return self.server.running

    def stop(self) -> None:
        """Shut the server down; the port is free again."""
        self.server.stop()

    def _repr_html_(self) -> str:
        if not self.running:
            return "<p>The dashboard is stopped.</p>"
        src = html.escape(self.start_url, quote=True)
        return (
            f'<iframe src="{src}" width="100%" height="{int(self.height)}" '
            'style="border: 1px solid #ddd;"></iframe>'
        )

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"Dashboard({self.url!r}, {state})"


def dashboard(
    model: HookedTransformer | dict[str, HookedTransformer],
    prompt: str | None = None,
    height: int = 900,
    **options: Any,
) -> Dashboard:
    """Start the ``interp serve`` app for ``model`` (or ``{name: model}``) in a background
    thread on a free 127.0.0.1 port; display the result to see the page in an IFrame.
    ``prompt`` fills the prompt box; ``height`` is the IFrame's, in pixels; ``options`` go to
    ``interp.serve.create_app``.

    Example:
        >>> board = interp.serve.dashboard(interp.load_model("attn-only-2l"), prompt="1 2 3 1 2")
        >>> board.start_url
        'http://127.0.0.1:...#model=attn-only-2l&prompt=1%202%203%201%202'
        >>> board.stop()
    """
    from interp.serve.app import create_app  # fastapi loads when a dashboard starts

    models = model if isinstance(model, dict) else {model.cfg.model_name: model}
    server = BackgroundServer(create_app(models, **options)).start()
    start_url = server.url
    if prompt:
        name = next(iter(models))
        start_url += f"#model={quote(name, safe='')}&prompt={quote(prompt, safe='')}"
    return Dashboard(server, start_url, height)
