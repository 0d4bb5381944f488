"""Patching against a hand-written TransformerLens loop (one ``run_with_hooks`` per index) on a
random 12-layer GPT-2-shaped model with a normalised logit difference:

* ``exact=True`` equals the loop bit for bit (``torch.equal``), on one thread and on two
  (kernels differ with the thread count);
* a patch that cannot change the run gives exactly the unpatched metric (0, normalised);
* the default (batched) mode is within float32 rounding of the loop: a bound from the
  dtype's eps, the depth and the logits' magnitude, relative to the clean/corrupted gap.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch

from interp import patching
from interp.loading.hf import from_hf_model
from interp.patching import normalized_logit_diff
from interp.utils import get_act_name
from tests.conftest import make_hf_gpt2

N_LAYERS, N_HEADS, VOCAB, N_POS = 12, 4, 200, 5
BOS = VOCAB - 1
CHANGED = (2, 3)  # the positions where the corrupted prompts differ

SWEEPS = [  # (sweep, activation, setter, index axes)
    ("resid_pre", "resid_pre", patching.layer_pos_patch_setter, "lp"),
    ("attn_out", "attn_out", patching.layer_pos_patch_setter, "lp"),
    ("mlp_out", "mlp_out", patching.layer_pos_patch_setter, "lp"),
    ("attn_head_out_all_pos", "z", patching.layer_head_vector_patch_setter, "lh"),
    ("attn_head_out_by_pos", "z", patching.layer_pos_head_vector_patch_setter, "lph"),
    ("attn_head_v_by_pos", "v", patching.layer_pos_head_vector_patch_setter, "lph"),
    ("attn_head_pattern_all_pos", "pattern", patching.layer_head_pattern_patch_setter, "lh"),
]


@pytest.fixture(scope="module")
def model():
    return from_hf_model(
        make_hf_gpt2(n_layer=N_LAYERS, n_embd=32, n_head=N_HEADS, vocab_size=VOCAB)
    ).eval()


@pytest.fixture
def threads(request):
    """Torch on ``request.param`` threads for one test (kernels differ with the count)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(saved)


def on_threads(*counts: int):
    """Run a test on each of these thread counts."""
    return pytest.mark.parametrize("threads", counts, indirect=True, ids=lambda n: f"{n}T")


# The batched mode is checked on the block sweeps and head outputs (the loop it is compared
# with is the exact mode, checked above).
BLOCK_AND_HEAD_SWEEPS = ("resid_pre", "attn_out", "mlp_out", "attn_head_out_all_pos")
# Two threads on a busy shared machine are slow: the cheap sweeps run on both counts.
TWO_THREAD_SWEEPS = ("resid_pre", "attn_head_out_all_pos", "attn_head_pattern_all_pos")
CASES = [
    pytest.param(*entry, threads, id=f"{entry[0]}-{threads}T")
    for entry in SWEEPS
    for threads in ((1, 2) if entry[0] in TWO_THREAD_SWEEPS else (1,))
]


def prompts(n_prompts: int = 1):
    """Clean and corrupted tokens [n_prompts, N_POS] sharing BOS, differing at CHANGED."""
    generator = torch.Generator().manual_seed(3)
    clean = torch.randint(0, VOCAB - 1, (n_prompts, N_POS), generator=generator)
    clean[:, 0] = BOS
    corrupted = clean.clone()
    for pos in CHANGED:
        corrupted[:, pos] = (clean[:, pos] + 1 + pos) % (VOCAB - 1)
    answers = torch.randint(0, VOCAB - 1, (n_prompts, 2), generator=generator)
    return clean, corrupted, answers


def setup_run(model, n_prompts: int = 1, names_filter=None):
    """Tokens, the clean cache, and a normalised logit difference built from plain forwards
    (random weights: the clean/corrupted gap is small, and the metric warns so)."""
    clean, corrupted, answers = prompts(n_prompts)
    with torch.no_grad():
        _, clean_cache = model.run_with_cache(clean, names_filter=names_filter)
        clean_logits, corrupted_logits = model(clean), model(corrupted)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The clean .* ill-conditioned", UserWarning)
        metric = normalized_logit_diff(answers, clean_logits, corrupted_logits)
    return clean, corrupted, clean_cache, metric, clean_logits, corrupted_logits


def tl_loop(model, corrupted, clean_cache, metric, setter, activation, kind):
    """TransformerLens's ``generic_activation_patch``, written out: for each index, one
    ``run_with_hooks`` of the corrupted tokens whose hook patches the activation in place,
    then ``metric(logits).item()`` (mean over prompts) into a float32 tensor."""
    sizes = {"l": N_LAYERS, "p": corrupted.shape[1], "h": N_HEADS}
    shape = tuple(sizes[axis] for axis in kind)
    out = torch.zeros(shape)
    for index in itertools.product(*(range(size) for size in shape)):
        name = get_act_name(activation, layer=index[0])

        def hook(activation, hook, index=index, name=name):
            return setter(activation, list(index), clean_cache[name])

        with torch.no_grad():
            logits = model.run_with_hooks(corrupted, fwd_hooks=[(name, hook)])
        out[index] = torch.as_tensor(metric(logits)).float().mean().item()
    return out


def sweep(name, *args, **options):
    result = getattr(patching, f"get_act_patch_{name}")(*args, progress=False, **options)
    return result.as_subclass(torch.Tensor)


def float32_bound(model, clean_logits, corrupted_logits, metric) -> float:
    """How far batched float32 rounding may move a normalised metric: each of the n_layers
    blocks rounds its output at ~eps relative to the residual stream, which reaches the
    logits at about their magnitude; four logits (two per run, and the gap's two) times that,
    divided by the gap the metric normalises by."""
    eps = torch.finfo(torch.float32).eps
    magnitude = max(
        clean_logits[:, -1].abs().max().item(), corrupted_logits[:, -1].abs().max().item()
    )
    gap = abs(metric.clean_value - metric.corrupted_value)
    return 4 * eps * model.cfg.n_layers * magnitude / gap


@pytest.mark.parametrize("name, activation, setter, kind, threads", CASES, indirect=["threads"])
def test_exact_sweep_equals_the_loop_bit_for_bit(model, threads, name, activation, setter, kind):
    _, corrupted, clean_cache, metric, *_ = setup_run(model)
    expected = tl_loop(model, corrupted, clean_cache, metric, setter, activation, kind)
    result = sweep(name, model, corrupted, clean_cache, metric, exact=True)
    assert torch.equal(result, expected), (result - expected).abs().max()
    assert result.std() > 0  # the patches do something


@on_threads(1)
def test_exact_mode_with_a_plain_metric_and_two_prompts(model, threads):
    """A TransformerLens-style scalar function, two prompts, a clean cache of resid_pre
    only (so the clean run took the fused attention kernel): still bit for bit."""
    _, corrupted, clean_cache, _, _, _ = setup_run(
        model, n_prompts=2, names_filter=lambda n: n.endswith("hook_resid_pre")
    )
    answers = prompts(2)[2]

    def tl_metric(logits):
        last = logits[:, -1]
        return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

    setter = patching.layer_pos_patch_setter
    expected = tl_loop(model, corrupted, clean_cache, tl_metric, setter, "resid_pre", "lp")
    result = sweep("resid_pre", model, corrupted, clean_cache, tl_metric, exact=True)
    assert torch.equal(result, expected)


@on_threads(1)
def test_exact_every_stack_equals_the_loops(model, threads):
    _, corrupted, clean_cache, metric, *_ = setup_run(model)
    setter = patching.layer_pos_patch_setter
    expected = torch.stack(
        [
            tl_loop(model, corrupted, clean_cache, metric, setter, kind, "lp")
            for kind in patching.BLOCK_PATCH_TYPES
        ]
    )
    result = patching.get_act_patch_block_every(
        model, corrupted, clean_cache, metric, exact=True, progress=False
    )
    assert torch.equal(result.as_subclass(torch.Tensor), expected)


@on_threads(1, 2)
@pytest.mark.parametrize("names_filter", [None, "resid_pre"], ids=["every hook", "resid_pre"])
def test_a_patch_that_cannot_change_the_run_gives_exactly_the_unpatched_metric(
    model, threads, names_filter
):
    """Before the first changed position the clean and corrupted runs are equal, so patching
    there changes nothing: the result is exactly the unpatched metric, 0 normalised, as the
    loop gets it (whichever kernel the clean cache was made with)."""
    keep = None if names_filter is None else (lambda n: n.endswith(names_filter))
    _, corrupted, clean_cache, metric, *_ = setup_run(model, names_filter=keep)
    result = sweep("resid_pre", model, corrupted, clean_cache, metric)
    unchanged = result[:, : CHANGED[0]]
    assert torch.equal(unchanged, torch.zeros_like(unchanged))
    if names_filter is None:  # by head too
        heads = sweep("attn_head_out_by_pos", model, corrupted, clean_cache, metric)
        assert torch.equal(heads[:, : CHANGED[0]], torch.zeros_like(heads[:, : CHANGED[0]]))
    # At layer 0 every position where the tokens agree is unchanged too.
    agree = [pos for pos in range(N_POS) if pos not in CHANGED]
    assert torch.equal(result[0, agree], torch.zeros(len(agree)))


@pytest.mark.parametrize(
    "name, activation, setter, kind, threads",
    [case for case in CASES if case.values[0] in BLOCK_AND_HEAD_SWEEPS],
    indirect=["threads"],
)
def test_batched_sweep_is_within_float32_rounding_of_the_loop(
    model, threads, name, activation, setter, kind
):
    _, corrupted, clean_cache, metric, clean_logits, corrupted_logits = setup_run(model)
    expected = sweep(name, model, corrupted, clean_cache, metric, exact=True)
    result = sweep(name, model, corrupted, clean_cache, metric, max_batch_size=8)
    bound = float32_bound(model, clean_logits, corrupted_logits, metric)
    deviation = (result - expected).abs().max().item()
    assert deviation <= bound, (deviation, bound)


# ----------------------------------------------------------------------- path patching
def arena_head_to_final(model, orig_tokens, orig_cache, new_cache, metric):
    """ARENA's path patching to the final residual stream, written out: per sender head,
    one ``run_with_hooks`` with every head's z frozen to the orig run's and the sender's from
    the new run (MLPs recomputed), then the metric of its logits."""
    out = torch.zeros(N_LAYERS, N_HEADS)
    for sender_layer, sender_head in itertools.product(range(N_LAYERS), range(N_HEADS)):

        def freeze(z, hook, sender_layer=sender_layer, sender_head=sender_head):
            layer = int(hook.name.split(".")[1])
            z[:] = orig_cache[hook.name]
            if layer == sender_layer:
                z[:, :, sender_head] = new_cache[hook.name][:, :, sender_head]
            return z

        with torch.no_grad():
            logits = model.run_with_hooks(
                orig_tokens, fwd_hooks=[(lambda name: name.endswith("hook_z"), freeze)]
            )
        out[sender_layer, sender_head] = torch.as_tensor(metric(logits)).float().mean().item()
    return out


@on_threads(1, 2)
def test_exact_path_patching_equals_arenas_loop(model, threads):
    clean, corrupted, clean_cache, metric, *_ = setup_run(model)
    with torch.no_grad():
        _, corrupted_cache = model.run_with_cache(corrupted)
    # Clean values into the corrupted run, as get_act_patch_* patches them.
    expected = arena_head_to_final(model, corrupted, corrupted_cache, clean_cache, metric)
    result = patching.get_path_patch_head_to_final_resid_post(
        model, corrupted, clean_cache, metric, exact=True, orig_cache=corrupted_cache,
        progress=False,
    )  # fmt: skip
    assert torch.equal(result.as_subclass(torch.Tensor), expected)


@on_threads(1, 2)
def test_batched_path_patching_is_within_float32_rounding(model, threads):
    _, corrupted, clean_cache, metric, clean_logits, corrupted_logits = setup_run(model)
    options = dict(progress=False)
    exact = patching.get_path_patch_head_to_heads(
        model, corrupted, clean_cache, metric, [(8, 1), (8, 2)], exact=True, **options
    )
    batched = patching.get_path_patch_head_to_heads(
        model, corrupted, clean_cache, metric, [(8, 1), (8, 2)], max_batch_size=7, **options
    )
    bound = float32_bound(model, clean_logits, corrupted_logits, metric)
    deviation = (batched - exact).abs().max().item()
    assert deviation <= bound, (deviation, bound)
    # Senders in or after the receivers' layer cannot reach them: exactly the unpatched 0.
    after = batched[8:].as_subclass(torch.Tensor)
    assert torch.equal(after, torch.zeros_like(after))
