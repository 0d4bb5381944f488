"""Run by ``test_tensor_parallel.py`` under ``torchrun --nproc_per_node 2`` (gloo, CPU): on
every rank, a tensor-parallel model against the same checkpoint in one process, check by
check, each result written to ``OUT/rank{r}.json`` for the test to assert.

Usage: ``torchrun --nproc_per_node 2 tp_checks.py OUT name=folder:processing ...``
(processing: "processed" for ``from_pretrained``, "raw" for ``from_pretrained_no_processing``,
"light" for that with the load, logits and cache checks alone),
then ``heads3=folder`` for the size check.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import torch
import torch.distributed as dist

from interp.distributed import TensorParallelError, sharded_hooks
from interp.patching import (
    get_act_patch_attn_head_out_all_pos,
    get_act_patch_resid_pre,
    get_attr_patch_attn_head_all_pos_every,
    get_attr_patch_block_every,
)
from interp.sae import SAE, SAEConfig
from interp.sae.splice import HookedSAETransformer
from tests.support.tolerances import error_bound, model_error_bound

TOKENS = torch.tensor([[1, 5, 9, 20, 3, 7, 11, 2], [4, 8, 15, 16, 23, 42, 6, 1]])
CORRUPTED = torch.tensor([[1, 6, 9, 21, 3, 7, 12, 2], [4, 9, 15, 17, 23, 40, 6, 1]])


class Checks:
    """The results of one rank: each a model, a check's name, whether it passed, details."""

    def __init__(self) -> None:
        self.results: list[dict] = []
        self.model = ""

    def record(self, check: str, ok: bool, detail: str = "") -> None:
        self.results.append({"model": self.model, "check": check, "ok": bool(ok), "detail": detail})

    def close(self, check: str, got, expected, bound: float) -> None:
        """``got`` equals ``expected`` (same shape) within ``bound``."""
        if tuple(got.shape) != tuple(expected.shape):
            self.record(check, False, f"shape {tuple(got.shape)} != {tuple(expected.shape)}")
            return
        if expected.numel() == 0:  # an expert no token was routed to: the shape alone
            self.record(check, True, "empty")
            return
        got, expected = got.detach().double(), expected.detach().double()
        same = got == expected  # masked scores: -inf in both
        error = torch.where(same, 0.0, got - expected).abs().max().item()
        self.record(check, error <= bound, f"max error {error:.3g}, bound {bound:.3g}")

    def raises(self, check: str, action, wanted: str) -> None:
        """``action()`` raises an error whose message holds ``wanted``."""
        try:
            action()
        except Exception as error:  # noqa: BLE001 - the message is checked
            self.record(check, wanted in str(error), f"{type(error).__name__}: {error}")
            return
        self.record(check, False, "no error raised")


def block_bytes(model) -> int:
    return sum(p.numel() * p.element_size() for p in model.blocks.parameters())


def forward_bound(cfg, expected, factor: int = 1) -> float:
    """The rounding bound of a forward (``factor`` times as deep for a backward)."""
    if factor == 1:
        return model_error_bound(cfg, magnitude=expected)
    widths = max(cfg.d_model, cfg.n_heads * cfg.d_head, cfg.d_mlp or 0)
    depth = factor * (2 * cfg.n_layers + 1)
    return error_bound(cfg.dtype, reduction=widths, depth=depth, magnitude=expected)


def check_model(checks: Checks, folder: str, processing: str) -> None:
    """Every check (``processing`` "processed" or "raw"), or with "light" the load, logits
    and the cache alone."""
    load = HookedSAETransformer.from_pretrained
    if processing != "processed":
        load = HookedSAETransformer.from_pretrained_no_processing
    tp, ref = load(folder, tp_size=2), load(folder)
    cfg = ref.cfg
    checks.record("cfg.tp_size", tp.cfg.tp_size == 2, str(tp.cfg.tp_size))
    ratio = block_bytes(tp) / block_bytes(ref)
    checks.record("block weights <= 0.6x", ratio <= 0.6, f"{ratio:.3f}")

    expected = ref(TOKENS)
    checks.close("logits", tp(TOKENS), expected, forward_bound(cfg, expected))

    _, ref_cache = ref.run_with_cache(TOKENS)
    _, tp_cache = tp.run_with_cache(TOKENS)
    missing = sorted(set(ref_cache.keys()) ^ set(tp_cache.keys()))
    checks.record("cache keys", not missing, str(missing))
    for name in ref_cache.keys():
        if name in tp_cache.keys():
            bound = forward_bound(cfg, ref_cache[name])
            checks.close(f"cache {name}", tp_cache[name], ref_cache[name], bound)
    if processing == "light":
        return

    for model in (tp, ref):
        model.set_use_attn_result(True)
    _, ref_cache = ref.run_with_cache(TOKENS, names_filter=lambda name: "hook_result" in name)
    _, tp_cache = tp.run_with_cache(TOKENS, names_filter=lambda name: "hook_result" in name)
    for name in ref_cache.keys():
        checks.close(
            f"cache {name}", tp_cache[name], ref_cache[name], forward_bound(cfg, ref_cache[name])
        )
    expected = ref(TOKENS)
    checks.close("logits with hook_result", tp(TOKENS), expected, forward_bound(cfg, expected))
    for model in (tp, ref):
        model.set_use_attn_result(False)

    check_edits(checks, tp, ref)
    check_sharded_hooks(checks, tp, ref)
    check_gradients(checks, tp, ref)
    check_patching(checks, tp, ref)
    check_sae(checks, tp, ref)
    check_generation(checks, tp, ref)


def edit_hooks(cfg) -> list:
    """Hooks that edit per-head and per-neuron activations across the ranks' shares."""

    def zero_head(z, hook):  # head 1 lives on rank 0, the last head on rank 1
        z = z.clone()
        z[:, :, 1] = 0
        z[:, :, -1] *= 2
        return z

    def mix_pattern(pattern, hook):  # reads every head: the mean over heads into head 0
        pattern = pattern.clone()
        pattern[:, 0] = pattern.mean(dim=1)
        return pattern

    def scale_neurons(post, hook):
        post = post.clone()
        post[..., : post.shape[-1] // 3] *= -1.5
        return post

    def shift_values(v, hook):
        return v + 0.1

    mlp_hook = (
        "blocks.1.mlp.hook_post" if not cfg.num_experts else "blocks.1.mlp.experts.0.hook_post"
    )
    return [
        ("blocks.0.attn.hook_z", zero_head),
        ("blocks.1.attn.hook_pattern", mix_pattern),
        ("blocks.0.attn.hook_v", shift_values),
        (mlp_hook, scale_neurons),
    ]


def check_edits(checks: Checks, tp, ref) -> None:
    hooks = edit_hooks(ref.cfg)
    expected = ref.run_with_hooks(TOKENS, fwd_hooks=hooks)
    got = tp.run_with_hooks(TOKENS, fwd_hooks=hooks)
    checks.record("an edit changes the logits", (expected - ref(TOKENS)).abs().max() > 1e-3)
    checks.close("editing hooks", got, expected, forward_bound(ref.cfg, expected))
    left = [name for name, point in tp.hook_dict.items() if point.fwd_hooks or point.bwd_hooks]
    checks.record("no hook left after run_with_hooks", not left, str(left))


def check_sharded_hooks(checks: Checks, tp, ref) -> None:
    """In sharded mode a hook sees this rank's heads or neurons, and its range; editing them
    is the one-process edit of those heads."""
    mlp = (
        "blocks.1.mlp.hook_post" if not ref.cfg.num_experts else "blocks.1.mlp.experts.0.hook_post"
    )
    names = ["blocks.0.attn.hook_z", "blocks.1.attn.hook_pattern", "blocks.0.attn.hook_k", mlp]
    _, ref_cache = ref.run_with_cache(TOKENS, names_filter=names)
    seen = {}

    def save(activation, hook):
        seen[hook.name] = (activation.clone(), hook.shard)

    with sharded_hooks(tp):
        tp.run_with_hooks(TOKENS, fwd_hooks=[(name, save) for name in names])
    for name in names:
        part, (axis, first, end) = seen[name]
        expected = ref_cache[name].narrow(axis, first, end - first)
        checks.close(f"sharded hook {name}", part, expected, forward_bound(ref.cfg, expected))
    n_heads = ref.cfg.n_heads

    def edit_mine(z, hook):  # head 1 zeroed and the last doubled, by the rank holding it
        _, first, end = hook.shard
        z = z.clone()
        for head, factor in ((1, 0.0), (n_heads - 1, 2.0)):
            if first <= head < end:
                z[:, :, head - first] *= factor
        return z

    def edit_all(z, hook):
        z = z.clone()
        z[:, :, 1] *= 0.0
        z[:, :, n_heads - 1] *= 2.0
        return z

    with sharded_hooks(tp):
        got = tp.run_with_hooks(TOKENS, fwd_hooks=[("blocks.0.attn.hook_z", edit_mine)])
    expected = ref.run_with_hooks(TOKENS, fwd_hooks=[("blocks.0.attn.hook_z", edit_all)])
    checks.close("an edit in sharded mode", got, expected, forward_bound(ref.cfg, expected))
    checks.record(
        "whole activations again after sharded_hooks",
        not any(getattr(point, "sharded", False) for point in tp.hook_dict.values()),
    )


def check_gradients(checks: Checks, tp, ref) -> None:
    cfg = ref.cfg
    names = [
        "hook_embed",
        "blocks.0.attn.hook_z",
        "blocks.1.attn.hook_pattern",
        "blocks.0.hook_resid_mid",
    ]
    names = [name for name in names if name in ref.hook_dict]
    grads = {}
    for key, model in (("tp", tp), ("ref", ref)):
        seen = {}

        def save(grad, hook, seen=seen):
            seen[hook.name] = grad.detach().clone()

        model.zero_grad(set_to_none=True)
        with model.hooks(bwd_hooks=[(name, save) for name in names]):
            model(TOKENS, return_type="loss").backward()
        grads[key] = seen
    for name in names:
        bound = forward_bound(cfg, grads["ref"][name], factor=2)
        checks.close(f"gradient at {name}", grads["tp"][name], grads["ref"][name], bound)
    # The gradient of a weight split by heads: this rank's heads' rows of the whole gradient.
    start = tp.blocks[0].attn.tp_layouts["hook_q"].starts[tp.tp.rank]
    count = tp.blocks[0].attn.W_Q.shape[0]
    expected = ref.blocks[0].attn.W_Q.grad[start : start + count]
    checks.close(
        "gradient of W_Q's shard",
        tp.blocks[0].attn.W_Q.grad,
        expected,
        forward_bound(cfg, expected, 2),
    )
    _, ref_cache = ref.run_with_cache(TOKENS, return_type="loss", incl_bwd=True)
    _, tp_cache = tp.run_with_cache(TOKENS, return_type="loss", incl_bwd=True)
    grad_names = [name for name in ref_cache.keys() if name.endswith("_grad")]
    checks.record("incl_bwd caches gradients", len(grad_names) > 10, str(len(grad_names)))
    worst = []
    for name in grad_names:
        bound = forward_bound(cfg, ref_cache[name], factor=2)
        error = (tp_cache[name] - ref_cache[name]).abs().max().item()
        if not error <= bound:
            worst.append(f"{name}: {error:.3g} > {bound:.3g}")
    checks.record("incl_bwd gradients", not worst, "; ".join(worst[:5]))


def check_patching(checks: Checks, tp, ref) -> None:
    answer = 7

    def metric(logits):
        return logits[:, -1, answer].mean()

    for sweep in (get_act_patch_resid_pre, get_act_patch_attn_head_out_all_pos):
        results = []
        for model in (tp, ref):
            _, clean_cache = model.run_with_cache(TOKENS)
            results.append(sweep(model, CORRUPTED, clean_cache, metric, progress=False))
        bound = forward_bound(ref.cfg, results[1].abs().max().item())
        checks.close(f"patching {sweep.__name__}", results[0], results[1], bound)
    for sweep in (get_attr_patch_block_every, get_attr_patch_attn_head_all_pos_every):
        results = []
        for model in (tp, ref):
            _, clean_cache = model.run_with_cache(TOKENS)
            results.append(sweep(model, CORRUPTED, clean_cache, metric))
        bound = forward_bound(ref.cfg, results[1].abs().max().item(), factor=2)
        checks.close(f"attribution patching {sweep.__name__}", results[0], results[1], bound)


def check_sae(checks: Checks, tp, ref) -> None:
    torch.manual_seed(0)  # the same SAE on every rank
    sae = SAE(SAEConfig(d_in=ref.cfg.d_model, d_sae=48, hook_name="blocks.0.hook_resid_post"))
    with torch.no_grad():
        for weight in sae.parameters():
            weight.normal_(std=0.2)
    expected = ref.run_with_saes(TOKENS, saes=[sae])
    checks.close(
        "spliced SAE",
        tp.run_with_saes(TOKENS, saes=[sae]),
        expected,
        forward_bound(ref.cfg, expected),
    )


def check_generation(checks: Checks, tp, ref) -> None:
    options = dict(max_new_tokens=4, do_sample=False, stop_at_eos=False, verbose=False)
    expected = ref.generate(TOKENS[:, :4], **options)
    got = tp.generate(TOKENS[:, :4], **options)
    checks.record(
        "greedy generation with the KV cache", torch.equal(got, expected), f"{got} {expected}"
    )


def check_bad_input(checks: Checks, folder: str, heads3: str) -> None:
    model = HookedSAETransformer.from_pretrained_no_processing(folder, tp_size=2)
    rank = dist.get_rank()
    tokens = TOKENS + rank  # rank 1's differ
    checks.raises("different tokens per rank", lambda: model(tokens), "different inputs")

    def wrong_shape(z, hook):
        return z[:, :, :1] if rank == 1 else z

    for name in ("blocks.0.attn.hook_z", "blocks.0.hook_resid_pre"):
        checks.raises(
            f"a hook of another shape on rank 1 ({name})",
            lambda name=name: model.run_with_hooks(TOKENS, fwd_hooks=[(name, wrong_shape)]),
            "shape",
        )
    hooks = [("blocks.1.attn.hook_pattern", lambda pattern, hook: None)] if rank == 1 else []
    checks.raises(
        "a hook on rank 1 only",
        lambda: model.run_with_hooks(TOKENS, fwd_hooks=hooks),
        "hooks at different points",
    )
    left = [name for name, point in model.hook_dict.items() if point.fwd_hooks]
    checks.record("no hook left after the error", not left, str(left))
    reference = HookedSAETransformer.from_pretrained_no_processing(folder)
    expected = reference(TOKENS)
    checks.close(
        "the model still runs after the errors",
        model(TOKENS),
        expected,
        forward_bound(reference.cfg, expected),
    )
    checks.raises(
        "tp_size other than the world size",
        lambda: HookedSAETransformer.from_pretrained(folder, tp_size=4),
        "does not divide the process group's 2 processes",
    )
    checks.raises(
        "tp_size that does not split the heads",
        lambda: HookedSAETransformer.from_pretrained(heads3, tp_size=2),
        "n_heads=3",
    )
    checks.record(
        "TensorParallelError is a RuntimeError", issubclass(TensorParallelError, RuntimeError)
    )
    checks.raises(
        "saving a shard", lambda: model.save(Path(folder) / "shard"), "partial checkpoint"
    )


def main() -> None:
    out = Path(sys.argv[1])
    checks = Checks()
    specs = dict(arg.split("=", 1) for arg in sys.argv[2:])
    heads3 = specs.pop("heads3")
    for name, spec in specs.items():
        folder, processing = spec.rsplit(":", 1)
        checks.model = name
        try:
            check_model(checks, folder, processing)
        except Exception:  # noqa: BLE001 - reported to the test, with the traceback
            checks.record("ran", False, traceback.format_exc())
    checks.model = "errors"
    first = next(iter(specs.values())).rsplit(":", 1)[0]
    try:
        check_bad_input(checks, first, heads3)
    except Exception:  # noqa: BLE001
        checks.record("ran", False, traceback.format_exc())
    rank = dist.get_rank()
    (out / f"rank{rank}.json").write_text(json.dumps(checks.results, indent=1))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()
