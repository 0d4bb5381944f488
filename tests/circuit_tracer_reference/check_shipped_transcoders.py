"""circuit-tracer 0.5.0 reads the transcoders shipped for shakespeare-char and traces the same
graph as interp.circuits: run the first line in circuit-tracer's environment (see
make_fixtures.py), the second in interp's.

    /work/ct-venv/bin/python tests/circuit_tracer_reference/check_shipped_transcoders.py write ct.pt
    python3 tests/circuit_tracer_reference/check_shipped_transcoders.py compare ct.pt

The prompt starts with token 0 ("\\n"), which circuit-tracer's stub tokenizer calls special, so
neither side prepends a token.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "interp" / "shipped" / "shakespeare-char"
TRANSCODERS = ROOT / "interp" / "shipped" / "transcoders"
PROMPT = "\nROMEO:\nIt seems she hangs upon the chee"


def prompt_tokens() -> torch.Tensor:
    chars = json.loads((MODEL / "config.json").read_text())["tokenizer"]["chars"]
    return torch.tensor([chars.index(c) for c in PROMPT])


def write(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import make_fixtures
    from circuit_tracer import attribute
    from circuit_tracer.graph import compute_graph_scores
    from circuit_tracer.utils.caching import load_transcoders_from_cache
    from safetensors.torch import load_file

    transcoders, _ = load_transcoders_from_cache(
        "shakespeare-char-transcoders", cache_dir=TRANSCODERS, device=torch.device("cpu"),
        lazy_decoder=False,
    )  # fmt: skip
    config = json.loads((MODEL / "config.json").read_text())
    keys = ("n_layers", "d_model", "n_ctx", "d_vocab", "n_heads", "d_head", "d_mlp", "act_fn")
    cfg = {key: config[key] for key in (*keys, "normalization_type", "eps")}
    state = load_file(MODEL / "model.safetensors")
    model = make_fixtures.replacement_model(cfg, state, transcoders)
    graph = attribute(prompt_tokens(), model, batch_size=256)
    scores = compute_graph_scores(graph)
    torch.save({"adjacency": graph.adjacency_matrix, "active": graph.active_features,
                "scores": scores}, out)  # fmt: skip


def compare(path: Path) -> None:
    from interp.circuits import ReplacementModel, attribute, compute_graph_scores

    theirs = torch.load(path)
    replacement = ReplacementModel.from_pretrained(
        "shakespeare-char", "shakespeare-char-transcoders"
    )
    graph = attribute(prompt_tokens(), replacement, batch_size=256)
    same = torch.equal(graph.active_features, theirs["active"])
    difference = (graph.adjacency_matrix - theirs["adjacency"]).abs().max()
    print(f"{len(graph.active_features)} active features, equal to circuit-tracer's: {same}")
    print(f"max |A_interp - A_ct| / max |A_ct|: {difference / theirs['adjacency'].abs().max():.2e}")
    print(f"scores {compute_graph_scores(graph)} vs circuit-tracer's {theirs['scores']}")


if __name__ == "__main__":
    {"write": write, "compare": compare}[sys.argv[1]](Path(sys.argv[2]))
