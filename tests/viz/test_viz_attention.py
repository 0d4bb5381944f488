"""interp.viz.attention / activations / circuitsvis_view: offline circuitsvis views."""

from __future__ import annotations

import json
import re

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.viz.activations import token_activations
from interp.viz.attention import attention_heads, attention_pattern
from interp.viz.circuitsvis_view import (
    CircuitsVisView,
    circuitsvis_bundle_path,
    circuitsvis_script,
    circuitsvis_tokens,
)


@pytest.fixture(scope="module")
def model_and_cache():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_vocab=50257, n_ctx=32, attn_only=True, seed=0
    )
    model = HookedTransformer(cfg, tokenizer="gpt2")
    prompt = "The cat sat. The cat"
    _, cache = model.run_with_cache(prompt)
    return model, cache, model.to_str_tokens(prompt)


def _props(view: CircuitsVisView) -> dict:
    props = re.search(r"CircuitsVis\[[^\]]*\], (\{.*\})\);</script>", view.fragment())
    return json.loads(props.group(1))


def test_attention_heads_reads_the_cache_pattern(model_and_cache):
    model, cache, tokens = model_and_cache
    view = attention_heads(cache, tokens, layer=1)
    props = _props(view)
    assert view.component == "AttentionHeads"
    assert props["attentionHeadNames"] == ["L1H0", "L1H1"]
    torch.testing.assert_close(torch.tensor(props["attention"]), cache["pattern", 1][0])
    # A tensor with a batch axis gives the same view.
    assert (
        _props(attention_heads(cache["pattern", 1], tokens, layer=1))["attention"]
        == props["attention"]
    )


def test_attention_pattern_is_one_head(model_and_cache):
    _, cache, tokens = model_and_cache
    props = _props(attention_pattern(cache, tokens, layer=0, head=1))
    torch.testing.assert_close(torch.tensor(props["attention"]), cache["pattern", 0][0, 1])
    with pytest.raises(ValueError, match="head=5 is out of range"):
        attention_pattern(cache, tokens, layer=0, head=5)


def test_views_reject_mismatched_inputs(model_and_cache):
    _, cache, tokens = model_and_cache
    with pytest.raises(ValueError, match="tokens for"):
        attention_heads(cache, tokens[:-1], layer=0)
    with pytest.raises(ValueError, match="needs layer="):
        attention_heads(cache, tokens)
    with pytest.raises(TypeError, match="list of token strings"):
        attention_heads(cache, "The cat", layer=0)
    with pytest.raises(ValueError, match=r"\[head, query_pos, key_pos\]"):
        attention_heads(torch.ones(2, 3, 4), ["a", "b", "c"])
    with pytest.raises(ValueError, match="values must be"):
        token_activations(torch.ones(3), tokens)


def test_token_activations_one_or_many_values(model_and_cache):
    _, cache, tokens = model_and_cache
    norms = cache["z", 0][0].norm(dim=-1)  # [pos, head]
    single = token_activations(norms[:, 0], tokens)
    multi = token_activations(norms, tokens, labels=["L0H0", "L0H1"])
    assert single.component == "ColoredTokens" and multi.component == "ColoredTokensMulti"
    assert _props(multi)["labels"] == ["L0H0", "L0H1"]
    torch.testing.assert_close(torch.tensor(_props(multi)["values"]), norms)


def test_circuitsvis_tokens_escapes_only_what_could_become_markup():
    tokens = ["<|endoftext|>", "</script>", "<img src=x onerror=alert(1)>", "&amp;", "a < b"]
    escaped = circuitsvis_tokens(tokens)
    assert escaped == [
        "<|endoftext|>",
        "&lt;/script>",
        "&lt;img␣src=x␣onerror=alert(1)>",
        "&amp;amp;",
        "a␣<␣b",
    ]
    assert circuitsvis_tokens([" ", "\n"]) == ["␣", "↵"]  # never a blank label
    assert not any(re.search(r"<[A-Za-z/!?]", token) for token in escaped)


def test_views_inline_the_local_bundle_and_never_a_cdn(model_and_cache, tmp_path):
    _, cache, tokens = model_and_cache
    view = attention_heads(cache, tokens, layer=0)
    page = view.save(tmp_path / "heads.html").read_text()
    bundle_size = circuitsvis_bundle_path().stat().st_size
    assert len(page) > bundle_size and "unpkg.com" not in page and "cdn" not in page.lower()
    assert view._repr_html_().startswith(circuitsvis_script())
    # Each fragment renders into its own element.
    assert view.fragment() != view.fragment()
