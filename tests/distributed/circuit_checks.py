"""Run by ``test_tp_circuits.py`` under ``torchrun --nproc_per_node 2`` (gloo, CPU): on every
rank, attribution graphs of a tensor-parallel ``ReplacementModel`` against the same
checkpoint and transcoders in one process (adjacency, active and selected features, pruning),
and what is refused; each result written to ``OUT/rank{r}.json`` for the test to assert.
Then a sharded harvest of a tensor-parallel model into ``HARVEST_OUT``, which the test reads
back against a one-process harvest.

Usage: ``torchrun --nproc_per_node 2 circuit_checks.py OUT name=folder ...
harvest=FOLDER,DATA,HARVEST_OUT``
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from interp import HookedTransformer
from interp.circuits import ReplacementModel, TranscoderSet, attribute, prune_graph
from interp.circuits.attention.head_loadings import head_loadings
from interp.harvest import harvest
from interp.sae import SAE, SAEConfig
from tests.distributed.tp_checks import Checks
from tests.support.tolerances import error_bound

PROMPT = [1, 5, 9, 20, 3, 7, 11, 2, 30, 4]
# The harvest's settings (hooks split by heads, shared key/value heads, neurons, the residual).
HARVEST = dict(
    hooks="blocks.0.hook_resid_post,blocks.1.attn.hook_z,blocks.0.attn.hook_k,"
    "blocks.0.attn.hook_q,blocks.1.mlp.hook_post",
    positions="1:",
    batch_size=3,
    shard_tokens=40,
    progress=False,
)
# The transcoders' hooks: (input, output), one pair a model (circuit-tracer's names first).
HOOKS = {
    "gpt2": ("ln2.hook_normalized", "hook_mlp_out"),
    "llama": ("mlp.hook_in", "mlp.hook_out"),
    "gemma2": ("hook_resid_mid", "hook_mlp_out"),  # circuit-tracer's Gemma 2 transcoders
    "mixtral": ("mlp.hook_in", "mlp.hook_out"),  # the mixture of experts read as one MLP
}


def transcoders(name: str, n_layers: int, d_model: int, skip: bool) -> TranscoderSet:
    """Random transcoders, the same on every rank (seeded), reading and writing ``HOOKS``."""
    hook_in, hook_out = HOOKS[name]
    torch.manual_seed(1)
    saes = []
    for layer in range(n_layers):
        sae = SAE(
            SAEConfig(
                d_in=d_model,
                d_sae=48,
                architecture="skip_transcoder" if skip else "transcoder",
                hook_name=f"blocks.{layer}.{hook_in}",
                hook_name_out=f"blocks.{layer}.{hook_out}",
                apply_b_dec_to_input=False,
            )
        )
        with torch.no_grad():
            sae.W_enc.normal_(0, 0.3)
            sae.W_dec.normal_(0, 0.1)
            sae.b_enc.normal_(-0.4, 0.2)
            if skip:
                sae.W_skip.normal_(0, 0.2)
        saes.append(sae)
    return TranscoderSet.from_saes(saes)


def edge_bound(cfg, expected: torch.Tensor) -> float:
    """fp32 reduction-order rounding of an edge: each is a backward through every layer (a
    forward's depth) from the largest edge's magnitude down."""
    widths = max(cfg.d_model, cfg.n_heads * cfg.d_head, cfg.d_mlp or 0)
    depth = 2 * (2 * cfg.n_layers + 1)  # the frozen forward, then the backward
    return error_bound(cfg.dtype, reduction=widths, depth=depth, magnitude=expected.abs().max())


def compare_graphs(checks: Checks, what: str, got, expected, cfg) -> None:
    for field in ("active_features", "selected_features", "input_tokens"):
        same = torch.equal(getattr(got, field), getattr(expected, field))
        checks.record(f"{what} {field}", same, f"{len(getattr(got, field))} entries")
    ids = [target.vocab_idx for target in got.logit_targets]
    checks.record(
        f"{what} logit targets",
        ids == [target.vocab_idx for target in expected.logit_targets],
        str(ids),
    )
    bound = edge_bound(cfg, expected.adjacency_matrix)
    checks.close(f"{what} adjacency", got.adjacency_matrix, expected.adjacency_matrix, bound)
    mine, theirs = prune_graph(got, 0.8, 0.98), prune_graph(expected, 0.8, 0.98)
    for field in ("node_mask", "edge_mask"):
        same = torch.equal(getattr(mine, field), getattr(theirs, field))
        kept = int(getattr(theirs, field).sum())
        checks.record(f"{what} pruned {field}", same, f"{kept} kept")


def check_model(checks: Checks, name: str, folder: str) -> None:
    whole = HookedTransformer.from_pretrained_no_processing(folder)
    cfg = whole.cfg
    for skip in (True, False):
        what = "skip" if skip else "noskip"
        tcs = transcoders(name, cfg.n_layers, cfg.d_model, skip)
        if skip:  # circuit-tracer's constructor, tp_size passed through to the loader
            replacement = ReplacementModel.from_pretrained(folder, tcs, tp_size=2)
        else:
            tp_model = HookedTransformer.from_pretrained_no_processing(folder, tp_size=2)
            replacement = ReplacementModel.from_model(tp_model, tcs)
        checks.record(f"{what} model is split", replacement.cfg.tp_size == 2)
        reference = ReplacementModel.from_model(
            whole, transcoders(name, cfg.n_layers, cfg.d_model, skip)
        )
        got = attribute(PROMPT, replacement, batch_size=16)
        compare_graphs(checks, what, got, attribute(PROMPT, reference, batch_size=16), cfg)
        partial = dict(max_feature_nodes=12, batch_size=5, update_interval=1)
        got = attribute(PROMPT, replacement, **partial)
        expected = attribute(PROMPT, reference, **partial)
        compare_graphs(checks, f"{what} partial", got, expected, cfg)
        checks.record(f"{what} partial visits 12", len(got.selected_features) == 12)
    refused_hooks(checks, replacement, got)


def refused_hooks(checks: Checks, replacement: ReplacementModel, graph) -> None:
    """What the tensor-parallel graph does not cover, refused on every rank, the model left
    as it was."""
    model = replacement.model
    model.add_hook("blocks.0.hook_resid_pre", lambda x, hook: x)
    checks.raises(
        "a hook attached (autograd's path) is refused",
        lambda: attribute(PROMPT, replacement),
        "tensor-parallel model runs the written-out backward pass only",
    )
    model.reset_hooks()
    checks.raises(
        "head loadings are refused",
        lambda: head_loadings(replacement, graph, 0),
        "not covered there",
    )
    checks.record("no hook left", not any(p.has_hooks for p in model.hook_dict.values()))


def run_harvest(folder: str, data: str, out: str) -> None:
    """``harvest`` of a tensor-parallel model (sharded mode), with ``HARVEST`` settings;
    then rank 1's part of shard 1 is lost and the same call resumes: both ranks redo that
    shard together (rank 0's part alone being complete)."""
    model = HookedTransformer.from_pretrained_no_processing(folder, tp_size=2)
    harvest(model, data, out=out, **HARVEST)
    lost = Path(out) / "tp1" / "shard-00001.safetensors"
    if dist.get_rank() == 0:
        lost.unlink()
    dist.barrier()
    harvest(model, data, out=out, **HARVEST)
    if not lost.is_file():
        raise AssertionError(f"{lost} was not redone by the resumed harvest")


def main() -> None:
    out = Path(sys.argv[1])
    checks = Checks()
    for spec in sys.argv[2:]:
        name, folder = spec.split("=", 1)
        checks.model = name
        try:
            if name == "harvest":
                run_harvest(*folder.split(","))
                checks.record("ran", True)
            else:
                check_model(checks, name, folder)
        except Exception:  # noqa: BLE001 - reported to the test, with the traceback
            checks.record("ran", False, traceback.format_exc())
    (out / f"rank{dist.get_rank()}.json").write_text(json.dumps(checks.results, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
