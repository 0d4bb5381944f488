"""interp.viz.html: escaping, JSON inside <script>, inlined scripts and pages."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from interp.viz.html import escape_text, html_page, inline_script, script_json

XSS = ["</script><script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "<!-- &amp;"]


@pytest.mark.parametrize("text", XSS)
def test_script_json_has_no_markup_characters_and_round_trips(text):
    encoded = script_json({"tokens": [text], "values": torch.tensor([[1.5, -2.0]])})
    assert not set("<>&") & set(encoded)
    assert json.loads(encoded) == {"tokens": [text], "values": [[1.5, -2.0]]}


def test_script_json_converts_arrays_and_rejects_unknown_objects():
    assert json.loads(script_json(np.arange(3))) == [0, 1, 2]
    assert json.loads(script_json(torch.ones(2, dtype=torch.bfloat16))) == [1.0, 1.0]
    with pytest.raises(TypeError, match="object"):
        script_json(object())


def test_escape_text_escapes_quotes_and_tags():
    assert escape_text(XSS[1]) == "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"


def test_inline_script_cannot_be_closed_early_by_its_source():
    element = inline_script("var a = '</script><script>alert(1)</script>'; // <!--")
    assert element.count("</script") == 1 and element.endswith("</script>")
    assert "<!--" not in element


def test_html_page_escapes_the_title():
    page = html_page(XSS[0], "<p>body</p>")
    assert "<title>&lt;/script&gt;" in page and "<p>body</p>" in page
