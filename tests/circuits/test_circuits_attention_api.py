"""The attention-attribution API on the shipped model: shapes, annotations saved with the
graph (``to_pt`` and the JSON's optional ``"attention"`` field) and clear errors for bad
calls, with no hook left on the model."""

from __future__ import annotations

import json
from functools import cache

import pytest
import torch

from interp.circuits import (
    CustomTarget,
    Graph,
    ReplacementModel,
    annotate_attention,
    attribute,
    create_graph_files,
    head_loadings,
    qk_attribution,
)
from interp.circuits.attention.annotations import node_ids
from interp.circuits.graph_files import create_nodes

PROMPT = "ROMEO:\nIt seems she"


@cache
def replacement() -> ReplacementModel:
    return ReplacementModel.from_pretrained("shakespeare-char", "shakespeare-char-transcoders")


@cache
def graph() -> Graph:
    return attribute(PROMPT, replacement(), max_feature_nodes=16, batch_size=64)


def _no_hooks_left(model: ReplacementModel) -> bool:
    return not any(point.has_hooks for point in model.model.hook_dict.values())


def test_several_sources_at_once_equal_one_at_a_time() -> None:
    model, g = replacement(), graph()
    target = g.adjacency_matrix.shape[0] - 1
    sources = g.adjacency_matrix[target].abs().argsort(descending=True)[:3].tolist()
    together = head_loadings(model, g, target, sources)
    assert together.heads.shape == (4, 4, 3) and together.bypass.shape == (3,)
    for i, source in enumerate(sources):
        alone = head_loadings(model, g, target, source)
        assert alone.heads.shape == (4, 4)
        torch.testing.assert_close(alone.heads, together.heads[..., i])
        assert float(alone.edge) == float(g.adjacency_matrix[target, source])
    assert _no_hooks_left(model)


def test_annotations_are_saved_with_the_graph_and_in_the_json(tmp_path) -> None:
    model = replacement()
    g = attribute(PROMPT, model, max_feature_nodes=16, batch_size=64)
    plain = json.loads(create_graph_files(g, "plain", tmp_path).read_text())
    assert "attention" not in plain  # Neuronpedia's format unchanged without annotations
    annotations = annotate_attention(model, g, max_qk=6)
    assert len(annotations.targets) > 0 and 0 < len(annotations.qk) <= 6
    edges = g.adjacency_matrix[annotations.targets, annotations.sources]
    total = annotations.heads.sum((1, 2)) + annotations.bypass
    torch.testing.assert_close(total, edges, rtol=0, atol=1e-5 * edges.abs().max().item())

    g.to_pt(tmp_path / "graph.pt")
    loaded = Graph.from_pt(tmp_path / "graph.pt")
    assert torch.equal(loaded.attention.heads, annotations.heads)
    assert torch.equal(loaded.attention.qk[0].pairs, annotations.qk[0].pairs)
    assert loaded.attention.qk[0].key_nodes == annotations.qk[0].key_nodes

    document = json.loads(
        create_graph_files(
            loaded, "plain", tmp_path / "annotated", tokenizer=model.tokenizer
        ).read_text()
    )
    assert {k: document[k] for k in plain} == plain  # the rest is byte-for-byte the same
    attention = document["attention"]
    assert attention["rule"] == "last-head" and attention["n_heads"] == 4
    links = {(link["source"], link["target"]): link["weight"] for link in document["links"]}
    assert len(attention["head_loadings"]) == len(links)
    for entry in attention["head_loadings"]:
        assert entry["weight"] == links[entry["source"], entry["target"]]
        parts = entry["bypass"] + sum(v for _, _, v in entry["heads"]) + entry["other"]
        assert parts == pytest.approx(entry["weight"], abs=1e-5)
    for entry in attention["qk"]:
        parts = sum(v for _, _, v in entry["pairs"]) + entry["other"] + entry["remainder"]
        assert parts == pytest.approx(entry["score"], abs=1e-9)
        assert 0 <= entry["pattern"] <= 1


def test_node_ids_are_create_graph_files_ids() -> None:
    g = graph()
    every = torch.ones(g.adjacency_matrix.shape[0], dtype=torch.bool)
    nodes = create_nodes(g, every, torch.zeros(len(every)))
    assert node_ids(g) == [nodes[i]["node_id"] for i in range(len(every))]


@pytest.mark.parametrize(
    ("arguments", "error", "message"),
    [
        (dict(layer=4), ValueError, "layer=4 is out of range"),
        (dict(head=-1), ValueError, "head=-1 is out of range"),
        (dict(query_pos=3, key_pos=5), ValueError, "after query_pos"),
        (dict(key_pos=99), ValueError, "key_pos=99 is out of range"),
        (dict(layer=1.0), TypeError, "layer must be an int"),
    ],
)
def test_bad_qk_calls_are_refused(arguments, error, message) -> None:
    call = dict(layer=1, head=0, query_pos=6, key_pos=2) | arguments
    with pytest.raises(error, match=message):
        qk_attribution(replacement(), graph(), **call)
    assert _no_hooks_left(replacement())


def test_bad_head_loading_calls_are_refused() -> None:
    model, g = replacement(), graph()
    n_nodes = g.adjacency_matrix.shape[0]
    token = len(g.selected_features) + g.n_layers * g.n_pos
    with pytest.raises(ValueError, match="token node: it has no incoming"):
        head_loadings(model, g, token, 0)
    with pytest.raises(ValueError, match="not a node of the graph"):
        head_loadings(model, g, n_nodes, 0)
    with pytest.raises(TypeError, match="ReplacementModel"):
        head_loadings(model.model, g, n_nodes - 1, 0)
    custom = attribute(
        PROMPT, model, attribution_targets=[CustomTarget("x", 1.0, torch.ones(128))],
        max_feature_nodes=4, batch_size=64,
    )  # fmt: skip
    with pytest.raises(ValueError, match="custom attribution target"):
        head_loadings(model, custom, custom.adjacency_matrix.shape[0] - 1, 0)
    with model.model.hooks([("blocks.0.hook_resid_pre", lambda value, hook: None)]):
        with pytest.raises(ValueError, match="written-out backward pass"):
            head_loadings(model, g, n_nodes - 1, 0)
    other = attribute("JULIET:\nO", model, max_feature_nodes=4, batch_size=64)
    other.input_tokens = g.input_tokens[: len(other.input_tokens)]  # not its prompt any more
    with pytest.raises(ValueError, match="active features"):
        head_loadings(model, other, other.adjacency_matrix.shape[0] - 1, 0)
    assert _no_hooks_left(model)
