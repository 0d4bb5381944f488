"""Run by ``test_data_parallel.py`` under ``torchrun --nproc_per_node 4``: two copies of a
tensor-parallel model (a 2 x 2 mesh, data parallel x tensor parallel), each taking half of
the prompts; the gathered logits, patching sweeps and attribution graphs against one
process, written to ``OUT/rank{r}.json``. Then a harvest of DATA into HARVEST_OUT, its
shards dealt to the two copies (the test reads it back against one process).

Usage: ``torchrun --nproc_per_node 4 dp_tp_checks.py OUT FOLDER DATA HARVEST_OUT``
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from interp import HookedTransformer
from interp.circuits import ReplacementModel, attribute
from interp.distributed import data_parallel_share, gather_data_parallel
from interp.harvest import harvest
from interp.patching import get_act_patch_resid_pre
from tests.distributed.circuit_checks import HARVEST, edge_bound, transcoders
from tests.support.tolerances import model_error_bound

PROMPTS = torch.tensor(
    [
        [1, 5, 9, 20, 3, 7],
        [4, 8, 15, 16, 23, 42],
        [2, 2, 3, 5, 8, 13],
        [9, 8, 7, 6, 5, 4],
        [1, 1, 1, 1, 1, 1],
    ]
)


def metric(logits):
    return logits[:, -1, 7].mean()


def work(model, index: int) -> list[torch.Tensor]:
    """Prompt ``index``'s logits and its resid_pre patching sweep (into the next prompt)."""
    clean = PROMPTS[index : index + 1]
    corrupted = PROMPTS[(index + 1) % len(PROMPTS)][None]
    _, cache = model.run_with_cache(clean)
    sweep = get_act_patch_resid_pre(model, corrupted, cache, metric, progress=False)
    return [model(clean), sweep]


def graph(model, index: int) -> list[torch.Tensor]:
    """Prompt ``index``'s attribution graph: (adjacency, active features, selected ones)."""
    cfg = model.cfg
    replacement = ReplacementModel.from_model(
        model, transcoders("llama", cfg.n_layers, cfg.d_model, skip=True)
    )
    found = attribute(PROMPTS[index], replacement, max_feature_nodes=10, batch_size=8)
    return [found.adjacency_matrix, found.active_features, found.selected_features]


def check_graphs(model, reference) -> list[dict]:
    """A batch of graphs (one a prompt), split over the copies and gathered."""
    mine = data_parallel_share(model, list(range(len(PROMPTS))))
    gathered = gather_data_parallel(model, [graph(model, index) for index in mine])
    results = []
    for index in range(len(PROMPTS)):
        got, expected = gathered[index], graph(reference, index)
        same = all(torch.equal(a, b) for a, b in zip(got[1:], expected[1:], strict=True))
        bound = edge_bound(reference.cfg, expected[0])
        error = (got[0] - expected[0]).abs().max().item() if same else float("inf")
        results.append(
            {
                "check": f"prompt {index} graph",
                "ok": same and error <= bound,
                "detail": f"same features: {same}; {error:.3g} <= {bound:.3g}",
            }
        )
    return results


def main() -> None:
    out, folder = Path(sys.argv[1]), sys.argv[2]
    model = HookedTransformer.from_pretrained_no_processing(folder, tp_size=2)
    reference = HookedTransformer.from_pretrained_no_processing(folder)
    tp = model.tp
    mine = data_parallel_share(model, list(range(len(PROMPTS))))
    gathered = gather_data_parallel(model, [work(model, index) for index in mine])
    results = [
        {"check": "mesh", "ok": (tp.size, tp.dp_size) == (2, 2), "detail": f"{tp}"},
        {"check": "each copy did its share", "ok": len(mine) in (2, 3), "detail": str(mine)},
        {"check": "every prompt gathered", "ok": len(gathered) == len(PROMPTS), "detail": ""},
    ]
    for index in range(len(PROMPTS)):
        for what, got, expected in zip(
            ("logits", "sweep"), gathered[index], work(reference, index), strict=True
        ):
            bound = model_error_bound(reference.cfg, magnitude=expected)
            error = (got - expected).abs().max().item()
            results.append(
                {
                    "check": f"prompt {index} {what}",
                    "ok": error <= bound,
                    "detail": f"{error:.3g} <= {bound:.3g}",
                }
            )
    results += check_graphs(model, reference)
    harvest(model, sys.argv[3], out=sys.argv[4], **HARVEST)
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(results))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
