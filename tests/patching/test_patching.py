"""Batched activation patching equals one run_with_hooks per index (TransformerLens's method)."""

from __future__ import annotations

import pytest
import torch

import interp
from interp import patching
from interp.patching import (
    AnswerProbability,
    KLDivergence,
    LabelledTensor,
    LogitDiff,
    NormalizedMetric,
)
from interp.utils import get_act_name

N_LAYERS, N_HEADS, D_VOCAB = 3, 4, 97


def make_model(**overrides) -> interp.HookedTransformer:
    cfg = dict(
        n_layers=N_LAYERS, d_model=32, n_heads=N_HEADS, d_mlp=64, d_vocab=D_VOCAB, n_ctx=32,
        init_range=0.3, seed=0,
    )  # fmt: skip
    cfg.update(overrides)
    return interp.HookedTransformer(interp.HookedTransformerConfig(**cfg)).eval()


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model() -> interp.HookedTransformer:
    return make_model()


def prompts(n_prompts: int = 2, n_pos: int = 7, changed=(2, 5)):
    generator = torch.Generator().manual_seed(1)
    clean = torch.randint(0, D_VOCAB, (n_prompts, n_pos), generator=generator)
    corrupted = clean.clone()
    for pos in changed:
        corrupted[:, pos] = (clean[:, pos] + 1 + pos) % D_VOCAB
    answers = torch.randint(0, D_VOCAB, (n_prompts, 2), generator=generator)
    return clean, corrupted, answers


@pytest.fixture(scope="module")
def setup(model):
    clean, corrupted, answers = prompts()
    clean_logits, clean_cache = model.run_with_cache(clean)
    corrupted_logits = model(corrupted)
    return clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits


def naive_patch(model, corrupted, clean_cache, metric, setter, activation_name, shape):
    """TransformerLens's method: one full forward pass per index."""
    out = torch.zeros(shape)
    for index in _grid(shape):
        name = get_act_name(activation_name, layer=index[0])

        def hook(act, hook, index=index, name=name):
            return setter(act.clone(), list(index), clean_cache[name])

        logits = model.run_with_hooks(corrupted, fwd_hooks=[(name, hook)])
        out[index] = torch.as_tensor(metric(logits)).float().mean()
    return out


def _grid(shape):
    import itertools

    return list(itertools.product(*(range(s) for s in shape)))


SWEEPS = [
    ("get_act_patch_resid_pre", "resid_pre", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_resid_mid", "resid_mid", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_resid_post", "resid_post", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_attn_out", "attn_out", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_mlp_out", "mlp_out", "layer_pos_patch_setter", "lp"),
    ("get_act_patch_attn_head_out_all_pos", "z", "layer_head_vector_patch_setter", "lh"),
    ("get_act_patch_attn_head_q_all_pos", "q", "layer_head_vector_patch_setter", "lh"),
    ("get_act_patch_attn_head_k_all_pos", "k", "layer_head_vector_patch_setter", "lh"),
    ("get_act_patch_attn_head_v_all_pos", "v", "layer_head_vector_patch_setter", "lh"),
    ("get_act_patch_attn_head_pattern_all_pos", "pattern", "layer_head_pattern_patch_setter", "lh"),
    ("get_act_patch_attn_head_out_by_pos", "z", "layer_pos_head_vector_patch_setter", "lph"),
    ("get_act_patch_attn_head_q_by_pos", "q", "layer_pos_head_vector_patch_setter", "lph"),
    ("get_act_patch_attn_head_k_by_pos", "k", "layer_pos_head_vector_patch_setter", "lph"),
    ("get_act_patch_attn_head_v_by_pos", "v", "layer_pos_head_vector_patch_setter", "lph"),
    (
        "get_act_patch_attn_head_pattern_by_pos",
        "pattern",
        "layer_head_pos_pattern_patch_setter",
        "lhp",
    ),
]


def shape_of(kind: str, n_pos: int) -> tuple[int, ...]:
    sizes = {"l": N_LAYERS, "p": n_pos, "h": N_HEADS}
    return tuple(sizes[c] for c in kind)


@pytest.mark.parametrize("function_name, activation, setter_name, kind", SWEEPS)
def test_every_sweep_equals_one_forward_per_index(
    model, setup, function_name, activation, setter_name, kind
):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = LogitDiff(answers)
    expected = naive_patch(
        model, corrupted, clean_cache, metric, getattr(patching, setter_name), activation,
        shape_of(kind, corrupted.shape[1]),
    )  # fmt: skip
    # A small batch limit forces several batches, some with runs joining at later layers.
    result = getattr(patching, function_name)(
        model, corrupted, clean_cache, metric, max_batch_size=6, progress=False
    )
    assert isinstance(result, LabelledTensor)
    assert result.shape == expected.shape
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)
    # The patches do something: not every value is the corrupted baseline.
    assert result.std() > 1e-3


def test_dest_src_pattern_sweep_matches_naive(model):
    clean, corrupted, answers = prompts(n_prompts=1, n_pos=4, changed=(1,))
    _, clean_cache = model.run_with_cache(clean)
    metric = LogitDiff(answers)
    setter = patching.layer_head_dest_src_pos_pattern_patch_setter
    expected = naive_patch(
        model, corrupted, clean_cache, metric, setter, "pattern", (N_LAYERS, N_HEADS, 4, 4)
    )
    result = patching.get_act_patch_attn_head_pattern_dest_src_pos(
        model, corrupted, clean_cache, metric, progress=False
    )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize("max_batch_size", [1, 5, 1000])
def test_batch_size_does_not_change_results(model, setup, max_batch_size):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = LogitDiff(answers)
    expected = naive_patch(
        model, corrupted, clean_cache, metric, patching.layer_pos_patch_setter, "resid_pre",
        (N_LAYERS, corrupted.shape[1]),
    )  # fmt: skip
    result = patching.get_act_patch_resid_pre(
        model, corrupted, clean_cache, metric, max_batch_size=max_batch_size, progress=False
    )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)


def test_every_position_differs_single_prompt(model):
    """Prompts that differ everywhere: no patch is skipped, every run computes all positions."""
    generator = torch.Generator().manual_seed(3)
    clean = torch.randint(0, D_VOCAB, (1, 6), generator=generator)
    corrupted = torch.randint(0, D_VOCAB, (1, 6), generator=generator)
    _, clean_cache = model.run_with_cache(clean)
    metric = AnswerProbability(torch.tensor([5]))
    for function_name, activation, setter_name, kind in SWEEPS[:6]:
        expected = naive_patch(
            model, corrupted, clean_cache, metric, getattr(patching, setter_name), activation,
            shape_of(kind, 6),
        )  # fmt: skip
        result = getattr(patching, function_name)(
            model, corrupted, clean_cache, metric, progress=False
        )
        torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-5, rtol=0)


def test_metrics_batched_and_plain(model, setup):
    """Batch-aware metrics, their normalised form, KL, and plain TransformerLens-style
    scalar metrics (with and without metric_positions) all match the naive loop."""
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    normalized = NormalizedMetric.from_logits(LogitDiff(answers), clean_logits, corrupted_logits)

    def plain_logit_diff(logits):  # a TransformerLens metric: logits -> scalar
        last = logits[:, -1]
        return (last.gather(1, answers[:, :1]) - last.gather(1, answers[:, 1:])).mean()

    cases = [
        (normalized, {}),
        (KLDivergence(clean_logits, positions=[-2, -1]), {}),
        (AnswerProbability(answers[:, 0]), {}),
        (plain_logit_diff, {}),
        (plain_logit_diff, {"metric_positions": -1}),
    ]
    for metric, options in cases:
        expected = naive_patch(
            model, corrupted, clean_cache, metric, patching.layer_pos_patch_setter, "attn_out",
            (N_LAYERS, corrupted.shape[1]),
        )  # fmt: skip
        result = patching.get_act_patch_attn_out(
            model, corrupted, clean_cache, metric, progress=False, **options
        )
        torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)


def test_normalized_metric_is_zero_corrupted_one_clean(setup):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = patching.normalized_logit_diff(answers, clean_logits, corrupted_logits)
    assert metric(clean_logits).mean().item() == pytest.approx(1.0, abs=1e-5)
    assert metric(corrupted_logits).mean().item() == pytest.approx(0.0, abs=1e-5)
    kl = KLDivergence(clean_logits)
    assert kl(clean_logits).abs().max() < 1e-5 and (kl(corrupted_logits) > 0).all()


def test_every_helpers_stack_the_sweeps(model, setup):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = LogitDiff(answers)
    block = patching.get_act_patch_block_every(
        model, corrupted, clean_cache, metric, progress=False
    )
    assert block.axis_names == ("patch_type", "layer", "pos")
    assert block.labels("patch_type") == ["resid_pre", "attn_out", "mlp_out"]
    mlp = patching.get_act_patch_mlp_out(model, corrupted, clean_cache, metric, progress=False)
    torch.testing.assert_close(block[2], mlp.as_subclass(torch.Tensor))

    heads = patching.get_act_patch_attn_head_all_pos_every(
        model, corrupted, clean_cache, metric, progress=False
    )
    assert heads.shape == (5, N_LAYERS, N_HEADS)
    pattern = patching.get_act_patch_attn_head_pattern_all_pos(
        model, corrupted, clean_cache, metric, progress=False
    )
    torch.testing.assert_close(heads[4], pattern.as_subclass(torch.Tensor))

    by_pos = patching.get_act_patch_attn_head_by_pos_every(
        model, corrupted, clean_cache, metric, progress=False
    )
    assert by_pos.shape == (5, N_LAYERS, corrupted.shape[1], N_HEADS)
    pattern_by_pos = patching.get_act_patch_attn_head_pattern_by_pos(
        model, corrupted, clean_cache, metric, progress=False
    )  # [layer, head, dest_pos]
    torch.testing.assert_close(by_pos[4], pattern_by_pos.permute(0, 2, 1))


def test_generic_patch_with_index_df_and_labels(model, setup):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = LogitDiff(answers)
    grid = patching.get_act_patch_attn_head_out_by_pos(
        model, corrupted, clean_cache, metric, progress=False
    )
    rows = [(2, 5, 1), (0, 3, 3), (1, 6, 0)]
    flat = patching.generic_activation_patch(
        model, corrupted, clean_cache, metric, patching.layer_pos_head_vector_patch_setter, "z",
        index_df=torch.tensor(rows), progress=False,
    )  # fmt: skip
    torch.testing.assert_close(flat.as_subclass(torch.Tensor), torch.stack([grid[r] for r in rows]))
    result, index_df = patching.generic_activation_patch(
        model, corrupted, clean_cache, metric, patching.layer_head_vector_patch_setter, "v",
        index_axis_names=("layer", "head"), return_index_df=True, progress=False,
    )  # fmt: skip
    assert list(index_df.columns) == ["layer", "head"] and len(index_df) == N_LAYERS * N_HEADS
    assert result.flat_labels()[:2] == ["L0H0", "L0H1"]
    assert grid.labels("pos") == [str(i) for i in range(corrupted.shape[1])]


def test_bad_input_errors_and_no_hooks_left(model, setup):
    clean, corrupted, answers, clean_logits, clean_cache, corrupted_logits = setup
    metric = LogitDiff(answers)
    with pytest.raises(KeyError, match="hook_resid_prex"):
        patching.generic_activation_patch(
            model, corrupted, clean_cache, metric, patching.layer_pos_patch_setter,
            "resid_prex", index_axis_names=("layer", "pos"), progress=False,
        )  # fmt: skip
    with pytest.raises(ValueError, match="shape"):
        patching.get_act_patch_resid_pre(
            model, corrupted[:, :5], clean_cache, metric, progress=False
        )

    def exploding_metric(logits):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        patching.get_act_patch_resid_pre(
            model, corrupted, clean_cache, exploding_metric, progress=False
        )
    assert not any(point.has_hooks for point in model.hook_points())
    _, only_resid = model.run_with_cache(clean, names_filter=lambda n: "resid_pre" in n)
    with pytest.raises(KeyError, match="clean cache"):
        patching.get_act_patch_attn_out(model, corrupted, only_resid, metric, progress=False)


def test_labels_use_tokens_when_the_model_has_a_tokenizer():
    model = make_model(d_vocab=50257)
    model.tokenizer = interp.get_tokenizer("gpt2")
    clean = model.to_tokens("When Mary and John went")
    corrupted = model.to_tokens("When Alice and John went")
    _, clean_cache = model.run_with_cache(clean)
    metric = LogitDiff(
        torch.tensor([model.to_single_token(" Mary"), model.to_single_token(" John")])
    )
    result = patching.get_act_patch_resid_pre(model, corrupted, clean_cache, metric, progress=False)
    assert result.labels("pos") == [
        "<|endoftext|>|0",
        "When|1",
        " Alice|2",
        " and|3",
        " John|4",
        " went|5",
    ]
    assert result.labels("layer") == ["L0", "L1", "L2"]
    figure = result.plot()
    assert list(figure.layout.xaxis.ticktext)[2:4] == ["␣Alice|2", "␣and|3"]  # spaces shown
    assert list(figure.data[0].z.shape) == [N_LAYERS, 6]
