"""A graph saved by circuit-tracer 0.5.0's own ``Graph.to_pt``, for
``tests/circuits/test_circuits_graph_pt.py`` (``interp.circuits.Graph.from_pt`` reads it without
circuit-tracer or TransformerLens 2.x installed).

Run it in circuit-tracer's environment (see ``make_fixtures.py``), after ``make_fixtures.py``
(it reads that script's Llama weights and skip transcoders)::

    cd /tmp && /work/ct-venv/bin/python \
        /work/main/tests/circuit_tracer_reference/make_graph_pt_fixture.py

It is deterministic and writes ``circuit_tracer_graph.pt`` (the pickle names
``transformer_lens.config.HookedTransformerConfig`` and ``circuit_tracer.graph.LogitTarget``)
and ``circuit_tracer_graph_scores.json`` (prune masks' sizes and graph scores, as
circuit-tracer computes them on that graph).
"""

from __future__ import annotations

import json

import torch
from circuit_tracer import attribute
from circuit_tracer.graph import compute_graph_scores, prune_graph
from circuit_tracer.utils.caching import load_transcoders_from_cache
from make_fixtures import FAMILIES, HERE, PROMPT, replacement_model
from safetensors.torch import load_file


def main() -> None:
    torch.set_grad_enabled(True)
    folder = HERE / "llama"
    cfg = FAMILIES["llama"][0]
    transcoders, _ = load_transcoders_from_cache(
        "skip", cache_dir=folder, device=torch.device("cpu"), lazy_decoder=False
    )
    model = replacement_model(cfg, load_file(folder / "model.safetensors"), transcoders)
    graph = attribute(torch.tensor(PROMPT), model, batch_size=64, max_feature_nodes=20)
    graph.to_pt(str(HERE / "circuit_tracer_graph.pt"))
    node_mask, edge_mask, cumulative = prune_graph(graph, node_threshold=0.8, edge_threshold=0.98)
    replacement, completeness = compute_graph_scores(graph)
    scores = {
        "nodes_kept": int(node_mask.sum()),
        "edges_kept": int(edge_mask.sum()),
        "cumulative_scores_sum": float(cumulative.sum()),
        "replacement_score": replacement,
        "completeness_score": completeness,
    }
    (HERE / "circuit_tracer_graph_scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    print(scores)


if __name__ == "__main__":
    main()
