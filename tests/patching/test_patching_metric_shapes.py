"""Every patching sweep equals the one-forward-per-index reference for metrics of every shape
a user writes: a single logit (a view into the logits), a max, a mean over positions, a
log-softmax, a logit difference, a Python float, a 1-element tensor, one value per prompt.

Plain (TransformerLens-style) metrics get each run's logits in a buffer the engine reuses;
a metric that returns a view into it (``logits[0, -1, answer]``) once reported the last run's
value for every run of a batch. These tests run on random GPT-2-shaped models and on the
shipped models, with small batch limits so every batch holds several runs.
"""

from __future__ import annotations

import functools
import itertools

import pytest
import torch
from test_patching import SWEEPS, naive_patch
from test_patching_path import freeze_heads_hooks

import interp
from interp import patching
from interp.patching.path import path_patch_runs
from interp.utils import get_act_name

ANSWER, WRONG = 5, 11  # token ids every model's vocabulary has

METRICS = {
    "single_logit": lambda logits: logits[0, -1, ANSWER],
    "max": lambda logits: logits[0, -1].max(),
    "mean_over_positions": lambda logits: logits[0, :, ANSWER].mean(),
    "log_softmax": lambda logits: logits[0, -1].log_softmax(dim=-1)[ANSWER],
    "logit_diff": lambda logits: logits[0, -1, ANSWER] - logits[0, -1, WRONG],
    "zero_dim_tensor": lambda logits: (logits[:, -1, ANSWER] - logits[:, -1, WRONG]).mean(),
    "python_float": lambda logits: logits[0, -1, ANSWER].item(),
    "one_element_tensor": lambda logits: logits[0, -1, ANSWER : ANSWER + 1],
    "over_batch_dim": lambda logits: logits[:, -1, ANSWER],
}
# Metrics whose gradient attribution patching can take (a Python float has none).
DIFFERENTIABLE = [name for name in METRICS if name != "python_float"]


pytestmark = pytest.mark.usefixtures("one_thread")


def random_gpt2() -> interp.HookedTransformer:
    cfg = interp.HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=97, n_ctx=16, act_fn="gelu_new",
        normalization_type="LN", init_range=0.3, seed=4,
    )  # fmt: skip
    return interp.HookedTransformer(cfg).eval()


def random_attn_only() -> interp.HookedTransformer:
    cfg = interp.HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_vocab=61, n_ctx=16, attn_only=True,
        normalization_type="LNPre", init_range=0.3, seed=5,
    )  # fmt: skip
    return interp.HookedTransformer(cfg).eval()


MODELS = {
    "random_gpt2": random_gpt2,
    "random_attn_only": random_attn_only,
    "attn-only-2l": lambda: interp.load_model("attn-only-2l"),
    "shakespeare-char": lambda: interp.load_model("shakespeare-char"),
}


@functools.cache
def setup(model_name: str):
    """The model, 2 clean and corrupted prompts of 6 tokens (differing at 2 and 4), the clean
    cache."""
    model = MODELS[model_name]()
    generator = torch.Generator().manual_seed(0)
    d_vocab = model.cfg.d_vocab
    clean = torch.randint(0, d_vocab, (2, 6), generator=generator)
    corrupted = clean.clone()
    corrupted[:, 2] = (clean[:, 2] + 7) % d_vocab
    corrupted[:, 4] = (clean[:, 4] + 3) % d_vocab
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean)
    return model, clean, corrupted, clean_cache


def grid_shape(model, kind: str, n_pos: int) -> tuple[int, ...]:
    sizes = {"l": model.cfg.n_layers, "p": n_pos, "h": model.cfg.n_heads}
    return tuple(sizes[axis] for axis in kind)


@functools.cache
def reference_logits(model_name: str, activation: str, setter_name: str, kind: str):
    """The logits of every patched run, one full forward pass per index (TransformerLens's
    method, ``naive_patch``), [*grid, prompt, pos, d_vocab]."""
    model, _, corrupted, clean_cache = setup(model_name)
    shape = grid_shape(model, kind, corrupted.shape[1])
    recorded = []

    def record(logits):
        recorded.append(logits.detach().clone())
        return 0.0

    with torch.no_grad():
        naive_patch(
            model, corrupted, clean_cache, record, getattr(patching, setter_name), activation, shape
        )
    return torch.stack(recorded).view(*shape, *recorded[0].shape)


def reference_values(metric, logits: torch.Tensor) -> torch.Tensor:
    """The metric of each run's logits [*grid, prompt, pos, d_vocab], as TransformerLens
    takes it (a per-prompt result averaged)."""
    flat = logits.flatten(0, -4)
    values = [torch.as_tensor(metric(run_logits)).float().mean() for run_logits in flat]
    return torch.stack(values).view(logits.shape[:-3])


def assert_matches(result, expected, what: str) -> None:
    result = torch.as_tensor(result).as_subclass(torch.Tensor)
    assert result.shape == expected.shape, what
    torch.testing.assert_close(result, expected, atol=1e-4, rtol=1e-5, msg=lambda m: f"{what}: {m}")
    # Not every run reports the same value (what the reused-buffer bug gave).
    assert expected.flatten().unique().numel() > 1, what


SWEEP_BY_NAME = {sweep[0]: sweep[1:] for sweep in SWEEPS}


@pytest.mark.parametrize("metric_name", METRICS)
@pytest.mark.parametrize("sweep", [sweep[0] for sweep in SWEEPS])
@pytest.mark.parametrize("model_name", MODELS)
def test_sweep_equals_one_forward_per_index(model_name, sweep, metric_name):
    model, _, corrupted, clean_cache = setup(model_name)
    activation, setter_name, kind = SWEEP_BY_NAME[sweep]
    if model.cfg.attn_only and activation in ("resid_mid", "mlp_out"):
        pytest.skip("an attention-only model has no MLP")
    metric = METRICS[metric_name]
    expected = reference_values(metric, reference_logits(model_name, activation, setter_name, kind))
    result = getattr(patching, sweep)(
        model, corrupted, clean_cache, metric, max_batch_size=6, progress=False
    )
    assert_matches(result, expected, f"{sweep} on {model_name} with {metric_name}")


@pytest.mark.parametrize("metric_name", METRICS)
@pytest.mark.parametrize("model_name", ["random_gpt2", "attn-only-2l"])
def test_dest_src_pattern_sweep_equals_one_forward_per_index(model_name, metric_name):
    model, clean, corrupted, _ = setup(model_name)
    corrupted = corrupted[:, :4]
    _, clean_cache = model.run_with_cache(clean[:, :4])
    metric = METRICS[metric_name]
    shape = (model.cfg.n_layers, model.cfg.n_heads, 4, 4)
    expected = naive_patch(
        model, corrupted, clean_cache, metric,
        patching.layer_head_dest_src_pos_pattern_patch_setter, "pattern", shape,
    )  # fmt: skip
    result = patching.get_act_patch_attn_head_pattern_dest_src_pos(
        model, corrupted, clean_cache, metric, max_batch_size=6, progress=False
    )
    assert_matches(result, expected, f"dest_src_pos on {model_name} with {metric_name}")


EVERY = {
    "get_act_patch_block_every": (
        "get_act_patch_resid_pre", "get_act_patch_attn_out", "get_act_patch_mlp_out",
    ),
    "get_act_patch_attn_head_all_pos_every": tuple(
        f"get_act_patch_attn_head_{kind}_all_pos" for kind in patching.HEAD_PATCH_TYPES
    ),
    "get_act_patch_attn_head_by_pos_every": tuple(
        f"get_act_patch_attn_head_{kind}_by_pos" for kind in patching.HEAD_PATCH_TYPES
    ),
}  # fmt: skip


@pytest.mark.parametrize("metric_name", METRICS)
@pytest.mark.parametrize("every", EVERY)
@pytest.mark.parametrize("model_name", ["random_gpt2", "shakespeare-char"])
def test_every_sweep_equals_one_forward_per_index(model_name, every, metric_name):
    model, _, corrupted, clean_cache = setup(model_name)
    metric = METRICS[metric_name]
    expected = []
    for sweep in EVERY[every]:
        values = reference_values(metric, reference_logits(model_name, *SWEEP_BY_NAME[sweep]))
        if sweep.endswith("pattern_by_pos"):  # [layer, head, dest_pos] -> [layer, pos, head]
            values = values.permute(0, 2, 1)
        expected.append(values)
    result = getattr(patching, every)(
        model, corrupted, clean_cache, metric, max_batch_size=6, progress=False
    )
    assert_matches(result, torch.stack(expected), f"{every} on {model_name} with {metric_name}")


@pytest.mark.parametrize("metric_name", METRICS)
@pytest.mark.parametrize("model_name", MODELS)
def test_path_patching_equals_one_forward_per_sender(model_name, metric_name):
    """Heads to the final residual stream against ARENA's step-by-step loop; every receiver
    at once against activation patching of the heads' outputs."""
    model, clean, corrupted, clean_cache = setup(model_name)
    metric = METRICS[metric_name]
    n_layers, n_heads = model.cfg.n_layers, model.cfg.n_heads
    with torch.no_grad():
        _, corrupted_cache = model.run_with_cache(corrupted)
        final = f"blocks.{n_layers - 1}.hook_resid_post"
        expected = torch.zeros(n_layers, n_heads)
        for layer in range(n_layers):
            for head in range(n_heads):
                hooks = freeze_heads_hooks(model, clean_cache, corrupted_cache, (layer, head))
                with model.hooks(fwd_hooks=hooks):
                    _, cache = model.run_with_cache(clean, names_filter=final)
                logits = model.unembed(model.ln_final(cache[final]))
                expected[layer, head] = torch.as_tensor(metric(logits)).float().mean()
    result = patching.get_path_patch_head_to_final_resid_post(
        model, clean, corrupted_cache, metric, max_batch_size=4, progress=False
    )
    assert_matches(result, expected, f"path patching on {model_name} with {metric_name}")

    receivers = ["resid_end"]
    for layer in range(n_layers):
        receivers += [] if model.cfg.attn_only else [(layer, "mlp")]
        receivers += [(layer, head, kind) for head in range(n_heads) for kind in "qkv"]
    senders = [[(layer, head)] for layer in range(n_layers) for head in range(n_heads)]
    every_receiver = path_patch_runs(
        model, corrupted, clean_cache, metric, senders, receivers, max_batch_size=4,
        progress=False,
    )  # fmt: skip
    head_out = reference_logits(model_name, "z", "layer_head_vector_patch_setter", "lh")
    assert_matches(
        every_receiver.view(n_layers, n_heads), reference_values(metric, head_out),
        f"path patching, every receiver, on {model_name} with {metric_name}",
    )  # fmt: skip


def attribution_reference(model, corrupted, clean_cache, metric, activation, setter, shape):
    """The first-order estimate at each index, from TransformerLens's patch setter: the
    corrupted metric plus the gradient's dot product with what the setter changes."""
    names = [get_act_name(activation, layer) for layer in range(model.cfg.n_layers)]
    acts, zeros = {}, {}

    def keep(act, hook):  # adds a zero whose gradient is the activation's
        acts[hook.name] = act.detach()
        zeros[hook.name] = torch.zeros_like(act, requires_grad=True)
        return act + zeros[hook.name]

    with torch.enable_grad():
        logits = model.run_with_hooks(corrupted, fwd_hooks=[(name, keep) for name in names])
        baseline = torch.as_tensor(metric(logits)).float().mean()
        gradients = torch.autograd.grad(baseline, [zeros[name] for name in names])
        grads = dict(zip(names, gradients, strict=True))
    out = torch.zeros(shape)
    for index in itertools.product(*(range(size) for size in shape)):
        name = names[index[0]]
        corrupted_act = acts[name]
        change = setter(corrupted_act.clone(), list(index), clean_cache[name]) - corrupted_act
        out[index] = baseline.detach() + (change * grads[name]).sum()
    return out


@pytest.mark.parametrize("metric_name", DIFFERENTIABLE)
@pytest.mark.parametrize("sweep", [sweep[0] for sweep in SWEEPS])
@pytest.mark.parametrize("model_name", ["random_gpt2", "attn-only-2l"])
def test_attribution_equals_its_reference(model_name, sweep, metric_name):
    model, _, corrupted, clean_cache = setup(model_name)
    activation, setter_name, kind = SWEEP_BY_NAME[sweep]
    if model.cfg.attn_only and activation in ("resid_mid", "mlp_out"):
        pytest.skip("an attention-only model has no MLP")
    metric = METRICS[metric_name]
    shape = grid_shape(model, kind, corrupted.shape[1])
    expected = attribution_reference(
        model, corrupted, clean_cache, metric, activation, getattr(patching, setter_name), shape
    )
    result = getattr(patching, sweep.replace("get_act_", "get_attr_"))(
        model, corrupted, clean_cache, metric
    )
    assert_matches(result, expected, f"attribution {sweep} on {model_name} with {metric_name}")


@pytest.mark.parametrize("metric_name", ["single_logit", "max", "one_element_tensor"])
def test_metric_positions_equals_one_forward_per_index(metric_name):
    """With ``metric_positions`` a plain metric gets only those positions' logits."""
    model, _, corrupted, clean_cache = setup("random_gpt2")
    metric = METRICS[metric_name]
    logits = reference_logits("random_gpt2", "resid_pre", "layer_pos_patch_setter", "lp")
    expected = reference_values(metric, logits[..., -1:, :])
    result = patching.get_act_patch_resid_pre(
        model, corrupted, clean_cache, metric, metric_positions=-1, max_batch_size=6,
        progress=False,
    )  # fmt: skip
    assert_matches(result, expected, f"metric_positions=-1 with {metric_name}")
