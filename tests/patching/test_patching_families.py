"""Every batched patching function equals its one-forward-per-index reference on the model
families of ``tests.support.family_models`` (Llama-, Pythia-, Gemma 2-, Gemma 3- and Qwen 3-shaped:
grouped-query attention, partial rotary, parallel blocks, sandwich norms, soft caps, sliding
windows shorter than the prompt, QK norms).

Packed runs lie end to end along the position axis, so each must keep its prompt positions
(for rotary embeddings and sliding windows), restart from the rotated keys, and be scored on
soft-capped logits, as one full forward pass gives.
"""

from __future__ import annotations

import functools

import pytest
import torch
from test_patching import SWEEPS, naive_patch
from test_patching_path import freeze_heads_hooks

import interp
from interp import patching
from interp.patching import LogitDiff
from interp.patching.path import path_patch_runs
from interp.utils import get_act_name
from tests.support.family_models import COMMON, FAMILIES, N_POS, setup

ANSWER = 5
METRICS = {
    # A TransformerLens-style metric: logits -> scalar.
    "plain": lambda answers: lambda logits: logits[:, -1].log_softmax(dim=-1)[:, ANSWER].mean(),
    "logit_diff": LogitDiff,
}


pytestmark = pytest.mark.usefixtures("one_thread")


def grid_shape(model, activation: str, kind: str) -> tuple[int, ...]:
    """The index grid of a sweep: key and value sweeps index key/value heads."""
    n_heads = model.cfg.n_heads
    if activation in ("k", "v"):
        n_heads = model.cfg.n_key_value_heads or n_heads
    sizes = {"l": model.cfg.n_layers, "p": N_POS, "h": n_heads}
    return tuple(sizes[axis] for axis in kind)


@functools.cache
def reference_logits(family: str, activation: str, setter_name: str, kind: str):
    """Every patched run's logits, one full forward pass per index: [*grid, prompt, pos, vocab]."""
    model, _, corrupted, _, clean_cache = setup(family)
    shape = grid_shape(model, activation, kind)
    recorded = []

    def record(logits):
        recorded.append(logits.clone())
        return 0.0

    setter = getattr(patching, setter_name)
    with torch.no_grad():
        naive_patch(model, corrupted, clean_cache, record, setter, activation, shape)
    return torch.stack(recorded).view(*shape, *recorded[0].shape)


def reference_values(metric, logits: torch.Tensor) -> torch.Tensor:
    flat = logits.flatten(0, -4)
    values = [torch.as_tensor(metric(run_logits)).float().mean() for run_logits in flat]
    return torch.stack(values).view(logits.shape[:-3])


def metric_for(metric_name: str, answers):
    return METRICS[metric_name](answers)


def test_the_family_features_bite():
    """The caps and the window change the numbers, so the tests below would see them wrong."""
    model, clean, _, _, _ = setup("gemma2")
    with torch.no_grad():
        logits, cache = model.run_with_cache(clean)
        final = model.ln_final(cache["blocks.1.hook_resid_post"])
        uncapped = final @ model.unembed.W_U + model.unembed.b_U
    assert uncapped.abs().max() > 2 * model.cfg.output_logits_soft_cap
    assert logits.abs().max() < model.cfg.output_logits_soft_cap
    scores = cache["blocks.0.attn.hook_attn_scores"]
    assert torch.isinf(scores[:, :, -1, : N_POS - 3]).all()  # outside the window of 3
    assert torch.isfinite(scores[:, :, -1, N_POS - 3 :]).all()
    assert "blocks.0.hook_resid_mid" not in setup("pythia")[0].hook_dict


@pytest.mark.parametrize("metric_name", list(METRICS))
@pytest.mark.parametrize("function_name, activation, setter_name, kind", SWEEPS)
@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_sweep_equals_one_forward_per_index(
    family, function_name, activation, setter_name, kind, metric_name
):
    model, _, corrupted, answers, clean_cache = setup(family)
    metric = metric_for(metric_name, answers)
    sweep = getattr(patching, function_name)
    if activation == "resid_mid" and model.cfg.parallel_attn_mlp:
        with pytest.raises(KeyError, match="No hook point named 'blocks.0.hook_resid_mid'"):
            sweep(model, corrupted, clean_cache, metric, progress=False)
        return
    expected = reference_values(metric, reference_logits(family, activation, setter_name, kind))
    # A small batch limit: several batches, some with runs joining at the second layer.
    result = sweep(model, corrupted, clean_cache, metric, max_batch_size=6, progress=False)
    assert result.shape == expected.shape
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
    with torch.no_grad():  # the patches do something: not every value is the corrupted run's
        baseline = torch.as_tensor(metric(model(corrupted))).float().mean()
    assert (result - baseline).abs().max() > 1e-3


@pytest.mark.parametrize("family", list(FAMILIES))
def test_dest_src_pattern_sweep_equals_one_forward_per_index(family):
    model, _, corrupted, answers, clean_cache = setup(family)
    metric = LogitDiff(answers)
    setter = patching.layer_head_dest_src_pos_pattern_patch_setter
    shape = (model.cfg.n_layers, model.cfg.n_heads, N_POS, N_POS)
    with torch.no_grad():
        expected = naive_patch(model, corrupted, clean_cache, metric, setter, "pattern", shape)
    result = patching.get_act_patch_attn_head_pattern_dest_src_pos(
        model, corrupted, clean_cache, metric, progress=False
    )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_stacks_equal_the_references(family):
    """The *_every helpers stack the sweeps; under grouped-query attention each k and v entry
    is its key/value head's result, repeated over the query heads that share it."""
    model, _, corrupted, answers, clean_cache = setup(family)
    metric = LogitDiff(answers)
    group = model.cfg.n_heads // (model.cfg.n_key_value_heads or model.cfg.n_heads)

    def expected(activation, setter_name, kind):
        values = reference_values(metric, reference_logits(family, activation, setter_name, kind))
        return values.repeat_interleave(group, dim=-1) if activation in ("k", "v") else values

    if not model.cfg.parallel_attn_mlp:
        block = patching.get_act_patch_block_every(
            model, corrupted, clean_cache, metric, progress=False
        )
        by_name = {"resid_pre": SWEEPS[0], "attn_out": SWEEPS[3], "mlp_out": SWEEPS[4]}
        want = torch.stack([expected(*by_name[name][1:]) for name in block.labels("patch_type")])
        torch.testing.assert_close(block.as_subclass(torch.Tensor), want, atol=1e-5, rtol=0)

    all_pos = patching.get_act_patch_attn_head_all_pos_every(
        model, corrupted, clean_cache, metric, progress=False
    )
    want = torch.stack([expected(*sweep[1:]) for sweep in SWEEPS[5:10]])
    assert all_pos.shape == (5, model.cfg.n_layers, model.cfg.n_heads)
    torch.testing.assert_close(all_pos.as_subclass(torch.Tensor), want, atol=1e-5, rtol=0)

    by_pos = patching.get_act_patch_attn_head_by_pos_every(
        model, corrupted, clean_cache, metric, progress=False
    )
    want = [expected(*sweep[1:]) for sweep in SWEEPS[10:15]]
    want[4] = want[4].permute(0, 2, 1)  # the pattern's [layer, head, dest] as [layer, pos, head]
    torch.testing.assert_close(
        by_pos.as_subclass(torch.Tensor), torch.stack(want), atol=1e-5, rtol=0
    )


@pytest.mark.parametrize("family", list(FAMILIES))
def test_path_patching_equals_arena_reference(family):
    """Each head to the final residual stream, and each head to two heads' queries, against
    ARENA's step-by-step algorithm (full forward passes with hooks)."""
    model, clean, corrupted, answers, clean_cache = setup(family)
    metric = LogitDiff(answers)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    final = f"blocks.{n_layers - 1}.hook_resid_post"
    with torch.no_grad():
        _, corrupted_cache = model.run_with_cache(corrupted)
        to_final = torch.zeros(n_layers, n_heads)
        to_queries = torch.zeros(n_layers, n_heads)
        q_name = f"blocks.{n_layers - 1}.attn.hook_q"
        for layer in range(n_layers):
            for head in range(n_heads):
                hooks = freeze_heads_hooks(model, clean_cache, corrupted_cache, (layer, head))
                with model.hooks(fwd_hooks=hooks):
                    _, cache = model.run_with_cache(clean, names_filter=[final, q_name])
                logits = model.unembed(model.ln_final(cache[final]))
                to_final[layer, head] = metric(logits).mean()

                def patch_q(q, hook, patched=cache[q_name]):
                    q = q.clone()
                    q[:, :, [0, 3]] = patched[:, :, [0, 3]]
                    return q

                logits = model.run_with_hooks(clean, fwd_hooks=[(q_name, patch_q)])
                to_queries[layer, head] = metric(logits).mean()
    result = patching.get_path_patch_head_to_final_resid_post(
        model, clean, corrupted_cache, metric, progress=False, max_batch_size=6
    )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), to_final, atol=1e-5, rtol=0)
    assert result.std() > 1e-3
    receiver_heads = [(n_layers - 1, 0), (n_layers - 1, 3)]
    result = patching.get_path_patch_head_to_heads(
        model, clean, corrupted_cache, metric, receiver_heads=receiver_heads, receiver_input="q",
        progress=False,
    )  # fmt: skip
    torch.testing.assert_close(result.as_subclass(torch.Tensor), to_queries, atol=1e-5, rtol=0)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_path_patching_through_every_receiver_is_activation_patching(family):
    """Every downstream receiver (each head's q, k, v input, every MLP, the final residual)
    gives ordinary activation patching of the sender's output: MLPs of parallel blocks read
    resid_pre, and grouped-query key/value inputs are received by whole groups."""
    model, _, corrupted, answers, clean_cache = setup(family)
    metric = LogitDiff(answers)
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    receivers = ["resid_end"]
    for layer in range(n_layers):
        receivers.append((layer, "mlp"))
        receivers += [(layer, head, kind) for head in range(n_heads) for kind in "qkv"]
    senders = [[(layer, head)] for layer in range(n_layers) for head in range(n_heads)]
    result = path_patch_runs(
        model, corrupted, clean_cache, metric, senders, receivers, progress=False
    ).view(n_layers, n_heads)
    expected = reference_values(
        metric, reference_logits(family, "z", "layer_head_vector_patch_setter", "lh")
    )
    torch.testing.assert_close(result, expected, atol=1e-5, rtol=0)
    assert not any(point.has_hooks for point in model.hook_points())


def test_grouped_key_value_receivers_must_be_whole_groups():
    model, clean, corrupted, answers, clean_cache = setup("llama")
    with pytest.raises(ValueError) as error:
        patching.get_path_patch_head_to_heads(
            model, clean, clean_cache, LogitDiff(answers), receiver_heads=[(1, 2)],
            receiver_input="v", progress=False,
        )  # fmt: skip
    assert str(error.value) == (
        "Receiver (1, 2, 'v'): with grouped-query attention, query heads [2, 3] of layer 1 "
        "share one value input, so it reaches all of them; pass the whole group as receivers "
        "([(1, 2, 'v'), (1, 3, 'v')])."
    )


def first_order_reference(model, corrupted, clean_cache, metric, kind: str) -> torch.Tensor:
    """metric(corrupted) + (clean - corrupted) . d metric / d activation, summed over the
    axes the kind does not keep, with the gradient from ``retain_grad`` on a plain forward."""
    activation, reduction, _ = patching.attribution.ATTRIBUTION_KINDS[kind]
    names = [get_act_name(activation, layer) for layer in range(model.cfg.n_layers)]
    kept: dict[str, torch.Tensor] = {}

    def keep(act, hook):
        act.retain_grad()
        kept[hook.name] = act

    def track(embed, hook):
        return embed.detach().requires_grad_(True)

    logits = model.run_with_hooks(
        corrupted, fwd_hooks=[("hook_embed", track)] + [(name, keep) for name in names]
    )
    value = torch.as_tensor(metric(logits)).float().mean()
    value.backward()
    axes, kept_axes = reduction.split("->")
    per_layer = [
        torch.einsum(
            f"{axes},{axes}->{kept_axes}", clean_cache[name] - kept[name].detach(), kept[name].grad
        )
        for name in names
    ]
    model.zero_grad(set_to_none=True)
    return value.detach() + torch.stack(per_layer)


@pytest.mark.parametrize("metric_name", list(METRICS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_attribution_equals_first_order_reference(family, metric_name):
    """Every attribution kind equals the first-order estimate computed with retain_grad,
    and has the shape of the exact sweep (key/value heads under grouped-query attention)."""
    model, _, corrupted, answers, clean_cache = setup(family)
    metric = metric_for(metric_name, answers)
    kinds = [k for k in patching.attribution.ATTRIBUTION_KINDS if "resid_mid" not in k]
    estimates = patching.attribution_patch(model, corrupted, clean_cache, metric, kinds)
    for kind in kinds:
        expected = first_order_reference(model, corrupted, clean_cache, metric, kind)
        estimate = estimates[kind].as_subclass(torch.Tensor)
        torch.testing.assert_close(estimate, expected, atol=1e-5, rtol=1e-5, msg=kind)
    by_kind = {sweep[0].removeprefix("get_act_patch_"): sweep for sweep in SWEEPS}
    for kind in ("attn_head_k_all_pos", "attn_head_v_by_pos", "resid_pre"):
        _, activation, _, axes = by_kind[kind]
        assert estimates[kind].shape == grid_shape(model, activation, axes)
    heads = patching.get_attr_patch_attn_head_all_pos_every(model, corrupted, clean_cache, metric)
    assert heads.shape == (5, model.cfg.n_layers, model.cfg.n_heads)
    group = model.cfg.n_heads // (model.cfg.n_key_value_heads or model.cfg.n_heads)
    torch.testing.assert_close(
        heads[2], estimates["attn_head_k_all_pos"].repeat_interleave(group, dim=-1)
    )


def test_qk_norm_without_rotary_runs_one_forward_per_index():
    """No hook holds a QK-normed model's keys without rotary: patching says so and runs one
    forward pass per index, with the reference's numbers."""
    cfg = interp.HookedTransformerConfig(
        **{**COMMON, "positional_embedding_type": "standard"}, normalization_type="RMS",
        use_qk_norm=True, seed=5,
    )  # fmt: skip
    model = interp.HookedTransformer(cfg).eval()
    _, clean, corrupted, answers, _ = setup("llama")
    metric = LogitDiff(answers)
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
        expected = naive_patch(
            model, corrupted, clean_cache, metric, patching.layer_pos_patch_setter, "resid_pre",
            (2, N_POS),
        )  # fmt: skip
    with pytest.warns(UserWarning, match="use_qk_norm without rotary embeddings"):
        result = patching.get_act_patch_resid_pre(
            model, corrupted, clean_cache, metric, progress=False
        )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)
