"""The offline attribution-graph viewer: Neuronpedia's graph JSON (what
``interp.circuits.create_graph_files`` writes: ``metadata``, ``qParams``, ``nodes``, ``links``)
as one self-contained page, a notebook cell or a page of ``interp serve``.

Nodes sit by layer (rows: tokens at the bottom, logits at the top) and position (columns,
labelled with the prompt's tokens, whitespace shown as ␣ and ↵); edges are drawn with width
by weight and colour by sign. Hover shows a node's details, a click its strongest edges and
logit effects, sliders re-prune the graph in the browser, and pinned nodes stay through it.

Long prompts: each pruning lays the graph out again. A run of two or more positions with no
kept node (nor a kept edge from its token) collapses into one narrow ``⋯`` column; the rest
are fitted to the canvas's width (a busy position wraps its nodes into lines, growing its
row's height; labels are thinned where columns are narrower than a character). The wheel
zooms the positions (x only) around the pointer, a drag pans, a double click (or "fit")
fits them again. A file of more than 5,000 edges opens at the edge threshold that keeps at
most 5,000 (the slider reaches them all). "find" marks nodes by text (the positions a text
spans in the prompt, or a clerp holding it), ``#5`` / ``L1 #5`` (feature 5, of layer 1),
``@12`` (position 12) or node id; Enter centres the first. Pinned nodes can be grouped into
named supernodes, and "Download JSON" saves the graph with them in ``qParams.supernodes``
(``[[label, node_id, ...], ...]``, members also in ``pinnedIds``), as Neuronpedia reads them
(``with_supernodes`` does the same in Python). The page records its layout and render time
(``data-gv-layout-ms``, ``data-gv-render-ms``) and ``data-gv-state="ready"`` once drawn.

Attention (issue 34; optional, Neuronpedia ignores it): a graph JSON's top-level
``attention`` (``interp.circuits`` writes it for annotated graphs) holds ``head_loadings``
(per link: ``source``, ``target``, ``weight``, ``bypass``, ``heads`` [[layer, head, value],
...], ``other``) and ``qk`` (per head, query and key position: ``layer``, ``head``,
``query_pos``, ``key_pos``, ``score``, ``capped_score``, ``pattern``, ``remainder``,
``query_rows`` / ``key_rows`` [{node_id or null, label}], ``pairs`` [[query row, key row,
value], ...], ``other``). Clicking an edge (or an edge's weight in the details) shows its
head loadings, each head's share of the edge; clicking a head there, or under "Heads
attending from position p" in a node's details, shows its strongest QK pairs with their share
of the score. Without the field these panels say that nothing was saved.
The script and style are inlined (``static/graph_view.js``, ``static/graph_view.css``), the
data is JSON with ``<``, ``>`` and ``&`` escaped, and the script writes every string from it
as text, so the page needs no network and token text never becomes markup.

circuit-tracer 0.5.0 (and so ``create_graph_files``) names the error node of layer ``l`` at
position ``p`` ``"0_{l}_{p}"``, which is also the id of feature ``l`` of layer 0 there: the
viewer keeps both nodes and tells their edges apart by what the file's order and the graph
allow (a target is never an error; a target's links are listed by source in graph order,
features before errors; a source sits below its target), and says how many it could not.

``extras`` (optional) adds what the JSON does not hold: ``transcoder``, ``"per-layer"`` or
``"cross-layer"`` (the JSON's ``feature_type`` says "cross layer transcoder" for both; without
it the viewer says "transcoder feature"), and ``features``, by feature
(``"{layer}_{feature}"``): ``activations`` [[position, value], ...] on the prompt,
``promoted`` / ``suppressed`` [[token, weight], ...] decoder logit weights and ``contexts``
[{tokens, acts, index}, ...]. Logit nodes, which the JSON puts at layer n_layers + 1, are
shown as the output.

Example:
    >>> import json, tempfile
    >>> folder = Path(tempfile.mkdtemp())    # create_graph_files writes folder/my-graph.json:
    >>> _ = (folder / "my-graph.json").write_text(json.dumps({"metadata": {"slug": "my-graph"},
    ...     "qParams": {}, "nodes": [], "links": []}))     # here an empty graph
    >>> data = json.loads((folder / "my-graph.json").read_text())
    >>> GraphView(data).save(folder / "my-graph.html").name       # open it offline
    'my-graph.html'
    >>> GraphView(data)                             # in a notebook: the viewer in the cell
    GraphView('Attribution graph: my-graph', 0 nodes, 0 links)
"""

from __future__ import annotations

import functools
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

from interp.viz.html import escape_text, html_page, inline_script, script_json

STATIC = resources.files("interp.viz") / "static"
GRAPH_KEYS = ("metadata", "nodes", "links")


@functools.cache
def viewer_asset(name: str) -> str:
    """The viewer's script (``graph_view.js``) or style (``graph_view.css``) as text."""
    if name not in ("graph_view.js", "graph_view.css"):
        raise ValueError(f"No viewer asset {name!r}: graph_view.js or graph_view.css.")
    return (STATIC / name).read_text(encoding="utf-8")


def check_graph_json(graph: Any) -> dict[str, Any]:
    """``graph`` if it is a graph JSON dict (``metadata``, ``nodes``, ``links``); else a
    ``ValueError`` saying what is missing."""
    if not isinstance(graph, dict):
        raise ValueError(
            f"A graph JSON is a dict (create_graph_files's {{slug}}.json), not a "
            f"{type(graph).__name__}."
        )
    missing = [key for key in GRAPH_KEYS if key not in graph]
    if missing:
        raise ValueError(
            f"The graph JSON has no {', '.join(missing)}; give the dict create_graph_files "
            "writes (metadata, qParams, nodes, links)."
        )
    return graph


def with_supernodes(
    graph: dict[str, Any], supernodes: dict[str, list[str]] | list[list[str]]
) -> dict[str, Any]:
    """A copy of the graph JSON ``graph`` with named groups of nodes saved in its ``qParams``
    as Neuronpedia (and circuit-tracer's frontend) reads them: ``supernodes`` is
    ``[[label, node_id, ...], ...]``, and every member is added to ``pinnedIds`` (their
    subgraph draws pinned nodes only). ``supernodes``: label -> node ids, or that list of
    lists. A node id the graph does not have is a ``ValueError`` naming it; the viewer shows
    the groups as rings and labels, edits them and downloads the JSON again.

    Example:
        >>> node = {"node_id": "0_5_2", "feature": 5, "layer": "0", "ctx_idx": 2,
        ...         "feature_type": "cross layer transcoder", "influence": 0.3}
        >>> graph = {"metadata": {"slug": "g"}, "qParams": {}, "nodes": [node], "links": []}
        >>> with_supernodes(graph, {"say a name": ["0_5_2"]})["qParams"]
        {'supernodes': [['say a name', '0_5_2']], 'pinnedIds': ['0_5_2']}
    """
    check_graph_json(graph)
    if isinstance(supernodes, dict):
        groups = list(supernodes.items())
    else:  # [[label, id, ...], ...] as Neuronpedia writes it
        groups = [(group[0], group[1:]) for group in supernodes]
    known = {str(node["node_id"]) for node in graph["nodes"]}
    saved, pinned = [], list((graph.get("qParams") or {}).get("pinnedIds") or [])
    for label, members in groups:
        label, ids = str(label), [str(i) for i in members]
        missing = [i for i in ids if i not in known]
        if missing or not ids:
            raise ValueError(
                f"Supernode {label!r}: {'no node ids' if not ids else f'no node {missing}'} "
                "in this graph; give node_ids from its nodes (e.g. '{layer}_{feature}_{pos}')."
            )
        saved.append([label, *dict.fromkeys(ids)])
        pinned += [i for i in ids if i not in pinned]
    q_params = dict(graph.get("qParams") or {}, supernodes=saved, pinnedIds=pinned)
    return {**graph, "qParams": q_params}


def graph_fragment(graph: dict[str, Any], extras: dict[str, Any] | None = None) -> str:
    """The viewer's element with its data, for a page that also loads the viewer's script
    (after it) and style."""
    data = {"graph": check_graph_json(graph), "extras": extras}
    element_id = f"interp-graph-{uuid.uuid4().hex[:12]}"
    return (
        f"<div class='gv-root' id='{element_id}'>"
        f"<script type='application/json' class='gv-data'>{script_json(data)}</script></div>"
    )


def _title(graph: dict[str, Any]) -> str:
    metadata = graph.get("metadata") or {}
    return f"Attribution graph: {metadata.get('slug') or metadata.get('prompt') or ''}"


class GraphView:
    """One attribution graph in the viewer; displays inline in a notebook.

    Args:
        graph: ``create_graph_files``'s JSON (``metadata``, ``nodes``, ``links``) as a dict.
        extras: per-feature data the JSON does not hold (see the module docstring), or None.
        title: the page's heading (default: from the graph's slug or prompt).

    Example:
        >>> import tempfile
        >>> node = {"node_id": "E_84_0", "feature": 84, "layer": "E", "ctx_idx": 0,
        ...         "feature_type": "embedding", "influence": 1.0}
        >>> graph_json = {"metadata": {"slug": "one-token", "prompt_tokens": ["T"]},
        ...               "qParams": {}, "nodes": [node], "links": []}
        >>> view = GraphView(graph_json, extras=None)
        >>> view.save(Path(tempfile.mkdtemp()) / "graph.html").name
        'graph.html'
    """

    def __init__(
        self, graph: dict[str, Any], extras: dict[str, Any] | None = None, title: str = ""
    ) -> None:
        self.graph = check_graph_json(graph)
        self.extras = extras
        self.title = title or _title(graph)

    def _inline(self) -> str:
        return (
            f"<style>{viewer_asset('graph_view.css')}</style>"
            f"{graph_fragment(self.graph, self.extras)}"
            f"{inline_script(viewer_asset('graph_view.js'))}"
        )

    def _repr_html_(self) -> str:
        return self._inline()

    def to_html(self) -> str:
        """A complete offline HTML page showing the graph."""
        body = f"<h1>{escape_text(self.title)}</h1>\n{self._inline()}"
        return html_page(self.title, body, head="<style>body { max-width: none; }</style>")

    def save(self, path: str | Path) -> Path:
        """Write ``to_html()`` to ``path`` (parents created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        return (
            f"GraphView({self.title!r}, {len(self.graph['nodes'])} nodes, "
            f"{len(self.graph['links'])} links)"
        )


def served_graph_page(
    script_src: str,
    graph: dict[str, Any] | None = None,
    extras: dict[str, Any] | None = None,
    links: dict[str, str] | None = None,
) -> str:
    """The viewer as a page whose script is loaded from ``script_src`` (a server that allows
    no inline script). With ``graph``, that graph; without, a file picker that opens a graph
    JSON from disk in the browser, and ``links`` (label -> href) to graphs the server has."""
    style = f"<style>{viewer_asset('graph_view.css')} body {{ max-width: none; }}</style>"
    script = f"<script src='{escape_text(script_src)}'></script>"
    if graph is not None:
        title = _title(graph)
        body = f"<h1>{escape_text(title)}</h1>{graph_fragment(graph, extras)}{script}"
        return html_page(title, body, head=style)
    items = "".join(
        f"<li><a href='{escape_text(href)}'>{escape_text(label)}</a></li>"
        for label, href in (links or {}).items()
    )
    listed = f"<h2>Graphs on this server</h2><ul>{items}</ul>" if items else ""
    body = (
        "<h1>Attribution graph viewer</h1>"
        "<p class='note'>Open a graph JSON written by <code>interp.circuits.create_graph_files"
        "</code> (or circuit-tracer's): it is read here in the browser and sent nowhere.</p>"
        "<p><input type='file' accept='.json,application/json' class='gv-file' "
        "data-target='gv-picked' data-status='gv-picked-status'> "
        f"<span id='gv-picked-status' class='note'></span></p>{listed}"
        f"<div class='gv-root' id='gv-picked'></div>{script}"
    )
    return html_page("Attribution graph viewer", body, head=style)
