"""create_graph_files writes the Neuronpedia graph JSON circuit-tracer 0.5.0 writes for the
same graph (``tests/circuit_tracer_reference/make_graph_files_fixtures.py`` wrote its
files): the same metadata, the same nodes (ids, order, fields) and links (order, weights
within 1e-4 of the largest), the same graph-metadata.json index."""

from __future__ import annotations

import json
from functools import cache

import pytest
import torch

from interp.circuits import Graph, attribute, compute_graph_scores, create_graph_files, prune_graph
from interp.circuits.graph_files import cantor_pairing
from interp.tokenizers import CharTokenizer
from tests.support.circuit_tracer_models import REFERENCE, replacement_model

FILES = REFERENCE / "graph_files"
CASES = {  # as make_graph_files_fixtures.GRAPH_CASES
    "gpt2_skip": dict(batch_size=64),
    "llama_clt": dict(batch_size=64),
    "gemma2_noskip": dict(batch_size=64),
    "llama_skip_partial": dict(batch_size=4, max_feature_nodes=25),
}
NUMBERS = ("influence", "activation", "token_prob")


@cache
def graph(case: str):
    family, variant = case.split("_", 1)
    tokens = torch.load(REFERENCE / f"{case}.pt", weights_only=True)["input_tokens"]
    return attribute(
        tokens, replacement_model(family, variant.removesuffix("_partial")), **CASES[case]
    )


@cache
def written(tmp_folder, case: str) -> dict:
    create_graph_files(graph(case), case, tmp_folder, node_threshold=0.8, edge_threshold=0.98)
    return json.loads((tmp_folder / f"{case}.json").read_text())


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("graph_files")


@pytest.mark.parametrize("case", CASES)
def test_graph_json_equals_circuit_tracer(folder, case: str) -> None:
    ours = written(folder, case)
    expected = json.loads((FILES / f"{case}.json").read_text())
    assert list(ours) == ["metadata", "qParams", "nodes", "links"] == list(expected)
    assert ours["metadata"] == expected["metadata"]
    assert ours["qParams"] == expected["qParams"]
    assert [n["node_id"] for n in ours["nodes"]] == [n["node_id"] for n in expected["nodes"]]
    for mine, theirs in zip(ours["nodes"], expected["nodes"], strict=True):
        assert list(mine) == list(theirs)
        assert {k: v for k, v in mine.items() if k not in NUMBERS} == {
            k: v for k, v in theirs.items() if k not in NUMBERS
        }
        for key in NUMBERS:
            assert (mine[key] is None) == (theirs[key] is None), key
            if theirs[key] is not None:
                assert mine[key] == pytest.approx(theirs[key], abs=1e-5), (mine["node_id"], key)
    pairs = [(link["source"], link["target"]) for link in ours["links"]]
    assert pairs == [(link["source"], link["target"]) for link in expected["links"]]
    weights = torch.tensor([link["weight"] for link in ours["links"]])
    reference = torch.tensor([link["weight"] for link in expected["links"]])
    assert (weights - reference).abs().max() <= 1e-4 * reference.abs().max()


def test_index_lists_every_graph_once(folder) -> None:
    for case in CASES:
        written(folder, case)
    create_graph_files(graph("gpt2_skip"), "gpt2_skip", folder)  # again: replaced
    ours = json.loads((folder / "graph-metadata.json").read_text())
    expected = json.loads((FILES / "graph-metadata.json").read_text())
    order = [g["slug"] for g in expected["graphs"]]
    assert sorted(g["slug"] for g in ours["graphs"]) == sorted(order)
    by_slug = {g["slug"]: g for g in ours["graphs"]}
    assert [by_slug[slug] for slug in order] == expected["graphs"]


def test_reads_a_saved_graph_and_checks_its_arguments(tmp_path) -> None:
    saved = tmp_path / "graph.pt"
    graph("gpt2_skip").to_pt(saved)
    path = create_graph_files(saved, "from-file", tmp_path / "out", scan=["tc_a", "tc_b"])
    metadata = json.loads(path.read_text())["metadata"]
    assert metadata["transcoder_list"] == ["tc_a", "tc_b"]
    assert metadata["scan"].startswith("custom-")
    again = create_graph_files(saved, "again", tmp_path / "out", scan=["tc_a", "tc_b"])
    assert json.loads(again.read_text())["metadata"]["scan"] == metadata["scan"]  # stable
    with pytest.raises(ValueError, match="slug"):
        create_graph_files(saved, "a/b", tmp_path)
    with pytest.raises(ValueError, match="is a file"):
        create_graph_files(saved, "x", saved)
    with pytest.raises(ValueError, match="node_threshold"):
        create_graph_files(saved, "x", tmp_path, node_threshold=1.5)
    with pytest.raises(ValueError, match="node_threshold='0.8'; it must be a number"):
        prune_graph(graph("gpt2_skip"), node_threshold="0.8")
    with pytest.raises(TypeError, match="prune_graph takes a Graph"):
        prune_graph(str(saved))
    with pytest.raises(TypeError, match="compute_graph_scores takes a Graph"):
        compute_graph_scores(None)
    (tmp_path / "garbage.pt").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="garbage.pt is not a saved graph"):
        Graph.from_pt(tmp_path / "garbage.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="other.pt is not a saved graph.*lacks"):
        Graph.from_pt(tmp_path / "other.pt")


def test_cantor_pairing_is_one_to_one() -> None:
    codes = {cantor_pairing(x, y) for x in range(40) for y in range(40)}
    assert len(codes) == 1600
    assert cantor_pairing(2, 5) == 33


def test_prompt_tokens_are_the_tokenizers_text(tmp_path) -> None:
    chars = ' ab"<>/\n&' + "".join(chr(ord("c") + i) for i in range(39))
    path = create_graph_files(graph("gpt2_skip"), "chars", tmp_path, tokenizer=CharTokenizer(chars))
    written = json.loads(path.read_text(encoding="utf-8"))
    tokens = graph("gpt2_skip").input_tokens.tolist()
    assert written["metadata"]["prompt_tokens"] == [chars[t] for t in tokens]
    logit = next(node for node in written["nodes"] if node["feature_type"] == "logit")
    assert logit["clerp"].startswith('Output "')


def test_circuit_tracers_import_paths() -> None:
    """A script ported by changing ``circuit_tracer`` to ``interp.circuits`` finds its names."""
    from interp.circuits import Graph, ReplacementModel
    from interp.circuits.graph import Graph as graph_module_graph
    from interp.circuits.graph import compute_graph_scores, prune_graph
    from interp.circuits.replacement_model import ReplacementModel as module_model
    from interp.circuits.utils import create_graph_files as from_utils
    from interp.circuits.utils.create_graph_files import create_graph_files as from_module

    assert from_utils is from_module is create_graph_files
    assert graph_module_graph is Graph and module_model is ReplacementModel
    assert callable(prune_graph) and callable(compute_graph_scores)
