"""Safe HTML building blocks: escaped text, JSON inside <script>, inlined scripts, whole pages.

Everything the visualizations write into a page goes through these functions, so a token
such as ``</script><script>alert(1)</script>`` ends up as text, never as markup or code.
"""

from __future__ import annotations

import html
import json
from typing import Any

import numpy as np
import torch

# Characters that could end a <script> element or start an HTML comment inside one; JSON and
# JavaScript both read the \uXXXX forms as the same characters.
_SCRIPT_UNSAFE = {
    "<": "\\u003c",
    ">": "\\u003e",
    "&": "\\u0026",
    "\u2028": "\\u2028",
    "\u2029": "\\u2029",
}


def escape_text(text: Any) -> str:
    """HTML-escape ``text`` (quotes included) for use in element content or attributes.

    Example:
        >>> escape_text('"><img src=x onerror=alert(1)>')
        '&quot;&gt;&lt;img src=x onerror=alert(1)&gt;'
    """
    return html.escape(str(text), quote=True)


def _to_jsonable(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float32).tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Cannot put a {type(value).__name__} into a page as JSON.")


def script_json(value: Any) -> str:
    """JSON for ``value`` that is safe to place inside a ``<script>`` element.

    Tensors and arrays become nested lists; ``<``, ``>`` and ``&`` become ``\\u003c`` etc.,
    so no string in the data can close the script or open a comment.

    Example:
        >>> script_json({"tokens": ["</script>"]})
        '{"tokens": ["\\\\u003c/script\\\\u003e"]}'
    """
    text = json.dumps(value, default=_to_jsonable, allow_nan=False)
    for char, replacement in _SCRIPT_UNSAFE.items():
        text = text.replace(char, replacement)
    return text


def inline_script(source: str) -> str:
    """A ``<script>`` element holding trusted JavaScript ``source`` (a library bundle).

    Any ``</script`` or ``<!--`` inside the source is rewritten to an equivalent form
    (``<\\/script``, ``<\\!--``) that cannot end the element early.

    Example:
        >>> inline_script("var s = '</script>';")
        "<script>var s = '<\\\\/script>';</script>"
    """
    safe = source.replace("</script", "<\\/script").replace("<!--", "<\\!--")
    return f"<script>{safe}</script>"


PAGE_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
       max-width: 1200px; padding: 16px 24px; color: #222; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.note { color: #555; font-size: 0.95em; }
.warning { background: #fff3cd; border: 1px solid #e0c36a; padding: 8px 12px; border-radius: 4px; }
.tokens { display: flex; flex-wrap: wrap; gap: 4px; font-family: ui-monospace, Menlo, monospace; }
.token { background: #eef; border: 1px solid #ccd; border-radius: 3px; padding: 1px 4px;
         white-space: pre; }
.token sub { color: #888; font-size: 0.7em; margin-left: 2px; }
table.data { border-collapse: collapse; font-size: 0.92em; }
table.data td, table.data th { border: 1px solid #ddd; padding: 3px 8px; text-align: left; }
.figure { max-width: 100%; overflow-x: auto; }
"""


def html_page(title: str, body: str, head: str = "") -> str:
    """A complete HTML document: escaped ``title``, trusted ``head`` and ``body`` markup.

    Example:
        >>> page = html_page("Report", "<p>hello</p>")
        >>> page.startswith("<!DOCTYPE html>")
        True
    """
    return (
        "<!DOCTYPE html>\n<html lang='en'>\n<head>\n<meta charset='utf-8'>\n"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>\n"
        f"<title>{escape_text(title)}</title>\n<style>{PAGE_STYLE}</style>\n{head}\n</head>\n"
        f"<body>\n{body}\n</body>\n</html>\n"
    )
