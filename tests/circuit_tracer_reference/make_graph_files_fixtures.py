"""Reference Neuronpedia graph files and feature interventions written by circuit-tracer 0.5.0,
for ``tests/circuits/test_circuits_graph_files.py`` and
``tests/circuits/test_circuits_intervention.py``.

Run it in circuit-tracer's environment (see ``make_fixtures.py``), after ``make_fixtures.py``
(it reads that script's weights and transcoders, and rebuilds its models)::

    cd /tmp && /work/ct-venv/bin/python \
        /work/main/tests/circuit_tracer_reference/make_graph_files_fixtures.py

It is deterministic and writes only into this folder:

- ``graph_files/``: ``create_graph_files`` on the graphs of ``GRAPH_CASES`` (slug = case,
  node threshold 0.8, edge threshold 0.98), each ``<case>.json`` and the shared
  ``graph-metadata.json`` index. circuit-tracer reads the tokenizer named by the model's
  config; these models have none, so ``AutoTokenizer`` is replaced by the stub tokenizer
  (token ids decode to their decimal digits, as interp decodes without a tokenizer).
- ``interventions/<family>_<variant>.pt``: for each model of ``INTERVENTION_MODELS``, the
  prompt's activations, the interventions (positions that are slices are stored as
  ``["slice", start, stop]``) and ``feature_intervention``'s logits and activations for each
  run of ``RUNS``, plus one greedy ``feature_intervention_generate``.
"""

from __future__ import annotations

import importlib
import json
import shutil
import types

import torch
from circuit_tracer import attribute
from circuit_tracer.utils.caching import load_transcoders_from_cache
from make_fixtures import FAMILIES, HERE, PROMPT, StubTokenizer, replacement_model
from safetensors.torch import load_file

# the module (circuit_tracer.utils exports a function of the same name)
graph_files_module = importlib.import_module("circuit_tracer.utils.create_graph_files")

GRAPH_CASES = {  # case: attribute's kwargs, as make_fixtures.py
    "gpt2_skip": dict(batch_size=64),
    "llama_clt": dict(batch_size=64),
    "gemma2_noskip": dict(batch_size=64),
    "llama_skip_partial": dict(batch_size=4, max_feature_nodes=25),
}
INTERVENTION_MODELS = [(f, v) for f in FAMILIES for v in ("skip", "clt")] + [("gpt2", "noskip")]
RUNS = {  # name: (which interventions, feature_intervention's kwargs)
    "frozen": ("steer", dict(freeze_attention=True)),
    "unfrozen": ("steer", dict(freeze_attention=False)),
    "constrained_all": ("steer", dict(constrained_layers=range(2))),
    "constrained_last": ("steer", dict(constrained_layers=range(1, 2))),
    "open_pre_activation": ("open", dict(apply_activation_function=False)),
}


def model_for(family: str, variant: str):
    cfg = FAMILIES[family][0]
    state = load_file(HERE / family / "model.safetensors")
    transcoders, _ = load_transcoders_from_cache(
        variant, cache_dir=HERE / family, device=torch.device("cpu"), lazy_decoder=False
    )
    return replacement_model(cfg, state, transcoders)


def write_graph_files() -> None:
    graph_files_module.AutoTokenizer = types.SimpleNamespace(
        from_pretrained=lambda name: StubTokenizer()
    )
    folder = HERE / "graph_files"
    shutil.rmtree(folder, ignore_errors=True)
    for case, kwargs in GRAPH_CASES.items():
        family, variant = case.split("_", 1)
        model = model_for(family, variant.removesuffix("_partial"))
        graph = attribute(torch.tensor(PROMPT), model, **kwargs)
        graph_files_module.create_graph_files(
            graph, case, str(folder), node_threshold=0.8, edge_threshold=0.98
        )
        written = json.loads((folder / f"{case}.json").read_text())
        print(f"{case}: {len(written['nodes'])} nodes, {len(written['links'])} links")


def interventions_for(activations: torch.Tensor) -> dict[str, list]:
    """Deterministic choices from the prompt's activations [n_layers, pos, d_transcoder]:
    ablate layer 0's strongest feature at position 3, set a silent one at position 5 to 2,
    triple layer 1's strongest at position 7; ``open`` adds a feature from position 1 on."""
    strongest = int(activations[0, 3].argmax())
    silent = int(activations[0, 5].argmin())
    last = int(activations[1, 7].argmax())
    steer = [
        (0, 3, strongest, 0.0),
        (0, 5, silent, 2.0),
        (1, 7, last, 3 * activations[1, 7, last].item()),
    ]
    open_ended = [(0, slice(1, None), silent, 1.5), (1, 7, last, 0.0)]
    return {"steer": steer, "open": open_ended}


def stored(interventions: list) -> list:
    return [
        [layer, ["slice", pos.start, pos.stop] if isinstance(pos, slice) else pos, feature, value]
        for layer, pos, feature, value in interventions
    ]


def write_interventions() -> None:
    folder = HERE / "interventions"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    tokens = torch.tensor(PROMPT)
    for family, variant in INTERVENTION_MODELS:
        model = model_for(family, variant)
        clean_logits, clean_activations = model.get_activations(tokens)
        chosen = interventions_for(clean_activations)
        record = {
            "clean_logits": clean_logits.clone(),
            "clean_activations": clean_activations.clone(),
            "interventions": {name: stored(value) for name, value in chosen.items()},
            "runs": {},
        }
        for name, (which, kwargs) in RUNS.items():
            logits, activations = model.feature_intervention(tokens, chosen[which], **kwargs)
            stored_kwargs = {k: list(v) if isinstance(v, range) else v for k, v in kwargs.items()}
            record["runs"][name] = {
                "interventions": which,
                "kwargs": stored_kwargs,
                "logits": logits.clone(),
                "activations": activations.clone(),
            }
        generated, logits, activations = model.feature_intervention_generate(
            tokens[None], chosen["open"], do_sample=False, max_new_tokens=4, stop_at_eos=False,
            verbose=False,
        )  # fmt: skip
        record["generate"] = {
            "interventions": "open",
            "kwargs": dict(do_sample=False, max_new_tokens=4, stop_at_eos=False),
            "tokens": generated.clone(),
            "logits": logits.clone(),
            "activations": activations.clone(),
        }
        torch.save(record, folder / f"{family}_{variant}.pt")
        print(f"{family}_{variant}: generated {generated[0, len(PROMPT) :].tolist()}")


def main() -> None:
    torch.set_grad_enabled(True)
    write_graph_files()
    write_interventions()


if __name__ == "__main__":
    main()
