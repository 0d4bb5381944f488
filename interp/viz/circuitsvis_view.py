"""An offline circuitsvis view: a React component from circuitsvis's bundled JavaScript.

circuitsvis's own ``str()`` output imports its JavaScript from a CDN (blank offline) and its
local output embeds props with ``json.dumps`` (a token ``</script>`` ends the script). This
module inlines the bundle that ships inside the circuitsvis wheel and embeds props with
``script_json``, so a view renders with no network and every token stays text.
"""

from __future__ import annotations

import functools
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import circuitsvis

from interp.analysis.labels import token_label
from interp.viz.html import escape_text, html_page, inline_script, script_json

# In HTML text, "<" starts markup only before a letter, "/", "!" or "?", and "&" starts a
# character reference only before a letter, digit or "#".
_TAG_START = re.compile(r"<(?=[A-Za-z/!?])")
_ENTITY_START = re.compile(r"&(?=[A-Za-z0-9#])")


@functools.cache
def circuitsvis_bundle_path() -> Path:
    """The circuitsvis JavaScript bundle shipped in the installed package (``dist/cdn/iife.js``).

    Example:
        >>> circuitsvis_bundle_path().name
        'iife.js'
    """
    path = Path(circuitsvis.__file__).parent / "dist" / "cdn" / "iife.js"
    if not path.is_file():
        raise FileNotFoundError(
            f"circuitsvis's JavaScript bundle is missing at {path}; reinstall it with "
            "`pip install --force-reinstall circuitsvis`."
        )
    return path


@functools.cache
def circuitsvis_script() -> str:
    """A ``<script>`` element defining the global ``CircuitsVis`` (about 1.3 MB), for one page.

    Example:
        >>> page_head = circuitsvis_script()   # once per page, before any view's fragment()
        >>> page_head.startswith("<script>"), len(page_head) > 1_000_000
        (True, True)
    """
    return inline_script(circuitsvis_bundle_path().read_text(encoding="utf-8"))


def circuitsvis_tokens(tokens: Sequence[str]) -> list[str]:
    """Token strings escaped for circuitsvis, which writes each token into the page as HTML
    (React's ``dangerouslySetInnerHTML``) and also draws it as a canvas axis label.

    Every ``<`` that could open a tag, comment or end tag (followed by a letter, ``/``, ``!``
    or ``?``) becomes ``&lt;`` and every ``&`` that could start a character reference
    becomes ``&amp;``, so the browser shows each token as text and runs nothing; other
    characters stay as they are, so ``<|endoftext|>`` still reads as itself on the canvas.
    Whitespace is made visible first (``interp.analysis.labels.token_label``: ``␣``, ``↵``),
    so a space or newline token is not a blank label.

    Example:
        >>> circuitsvis_tokens(["<|endoftext|>", "<img src=x onerror=alert(1)>", " &amp;"])
        ['<|endoftext|>', '&lt;img␣src=x␣onerror=alert(1)>', '␣&amp;amp;']
    """
    if isinstance(tokens, str):
        raise TypeError(
            "tokens must be a list of token strings, e.g. model.to_str_tokens(prompt), "
            "not one string."
        )
    escaped = (_ENTITY_START.sub("&amp;", token_label(token)) for token in tokens)
    return [_TAG_START.sub("&lt;", token) for token in escaped]


class CircuitsVisView:
    """One circuitsvis component with its props; displays inline in a notebook.

    ``fragment()`` is the markup for a page that already holds ``circuitsvis_script()``;
    ``_repr_html_()`` and ``to_html()`` carry the bundle themselves.

    Example:
        >>> import tempfile
        >>> view = CircuitsVisView("ColoredTokens", {"tokens": ["a", "b"], "values": [1, -1]})
        >>> view
        CircuitsVisView('ColoredTokens', props=['tokens', 'values'])
        >>> view.save(Path(tempfile.mkdtemp()) / "tokens.html").name   # open it offline
        'tokens.html'
    """

    def __init__(self, component: str, props: dict[str, Any], title: str = "") -> None:
        self.component = component
        self.props = {key: value for key, value in props.items() if value is not None}
        self.title = title or component

    def fragment(self) -> str:
        """A ``<div>`` and the script that renders the component into it."""
        element_id = f"interp-view-{uuid.uuid4().hex[:12]}"
        return (
            f"<div id='{element_id}' class='circuitsvis-view' "
            f"data-component='{escape_text(self.component)}' style='margin: 12px 0;'></div>\n"
            f"<script>CircuitsVis.render({script_json(element_id)}, "
            f"CircuitsVis[{script_json(self.component)}], {script_json(self.props)});</script>"
        )

    def _repr_html_(self) -> str:
        return circuitsvis_script() + "\n" + self.fragment()

    def to_html(self) -> str:
        """A complete offline HTML page showing this view."""
        body = f"<h1>{escape_text(self.title)}</h1>\n{self.fragment()}"
        return html_page(self.title, body, head=circuitsvis_script())

    def save(self, path: str | Path) -> Path:
        """Write ``to_html()`` to ``path`` (parents created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_html(), encoding="utf-8")
        return path

    def __repr__(self) -> str:
        return f"CircuitsVisView({self.component!r}, props={sorted(self.props)})"
