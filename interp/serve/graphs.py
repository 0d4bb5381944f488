"""The attribution-graph viewer (``interp.viz.graph_view``) as pages of ``interp serve``:

    GET /graph                the viewer with a file picker: it opens a graph JSON from disk
                              in the browser (nothing is uploaded), and links to the graphs
                              the server was given
    GET /graph/viewer.js      the viewer's script (the pages allow no inline script)
    GET /graph/{slug}         one of those graphs

Example:
    >>> from fastapi.testclient import TestClient
    >>> from interp.serve import create_app
    >>> graph = {"metadata": {"slug": "capital"}, "qParams": {}, "nodes": [], "links": []}
    >>> app = create_app({"attn-only-2l": model}, graphs={"capital": graph})  # or its path
    >>> with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as client:
    ...     client.get("/graph/capital").status_code
    200
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import Response

from interp.serve.assets import Asset
from interp.serve.errors import ApiError
from interp.viz.graph_view import STATIC, GraphView, served_graph_page

SCRIPT = "/graph/viewer.js"


def graph_views(graphs: dict[str, GraphView | dict[str, Any] | str | Path]) -> dict[str, GraphView]:
    """Each graph (a ``GraphView``, a graph JSON dict or the path of one) as a view, by
    slug; a ``ValueError`` naming a file that cannot be read."""
    views = {}
    for slug, graph in graphs.items():
        if isinstance(graph, (str, Path)):
            try:
                graph = json.loads(Path(graph).read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
                raise ValueError(f"Graph {slug!r}: cannot read {str(graph)!r}: {error}") from error
        views[slug] = graph if isinstance(graph, GraphView) else GraphView(graph)
    return views


def add_graph_routes(
    api: FastAPI, graphs: dict[str, GraphView | dict[str, Any] | str | Path], headers: dict
) -> None:
    """Add the viewer's routes to ``api``; pages are sent with ``headers`` (the CSP)."""
    views = graph_views(graphs)

    @api.get(SCRIPT, include_in_schema=False)
    def graph_script(request: Request) -> Response:
        asset = Asset.of(Path(str(STATIC / "graph_view.js")), "text/javascript", max_age=0)
        return asset.response(request)

    @api.get("/graph", include_in_schema=False)
    def graph_picker() -> Response:
        links = {slug: f"/graph/{quote(slug, safe='')}" for slug in views}
        html = served_graph_page(SCRIPT, links=links)
        return Response(html, media_type="text/html; charset=utf-8", headers=headers)

    @api.get("/graph/{slug}", include_in_schema=False)
    def graph_page(slug: str) -> Response:
        if slug not in views:  # only the graphs given: no request path reaches the disk
            raise ApiError(404, f"no graph {slug!r}; this server has {sorted(views)}.")
        view = views[slug]
        html = served_graph_page(SCRIPT, view.graph, view.extras)
        return Response(html, media_type="text/html; charset=utf-8", headers=headers)
