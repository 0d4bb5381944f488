"""The patching engine's economies: no position computed for nothing, and what the metric
reads only. Results are checked against one forward per index in test_patching.py."""

from __future__ import annotations

import pytest
import torch

from interp import patching
from interp.components import MLP, TransformerBlock
from interp.patching import FunctionMetric, LogitDiff
from interp.patching.metrics import infer_metric_reads
from tests.patching.test_patching import make_model, naive_patch, prompts


@pytest.fixture(scope="module")
def model():
    return make_model()


def count_positions(monkeypatch, module_class) -> list[int]:
    """Counts the (row, position) pairs every ``module_class`` forward receives."""
    seen = [0]
    forward = module_class.forward

    def counting_forward(self, x, *args, **kwargs):
        seen[0] += x.shape[0] * x.shape[1]
        return forward(self, x, *args, **kwargs)

    monkeypatch.setattr(module_class, "forward", counting_forward)
    return seen


@pytest.mark.parametrize("clean_cache_kind", ["every hook", "resid_pre only"])
def test_resid_pre_sweep_computes_no_position_for_nothing(model, monkeypatch, clean_cache_kind):
    """2 prompts of 7 tokens that differ at positions 2 and 5, 3 layers. Patches before
    position 2 (and, at layer 0, wherever the tokens agree) change nothing and are skipped,
    whichever attention kernel the clean cache was made with. Live runs compute positions
    from their first change on: layer 0, positions 2 and 5 (5 + 2 positions, 3 blocks);
    layers 1 and 2, positions 2-6 (5+4+3+2+1 = 15 positions, 2 and 1 blocks). With the
    corrupted run (7 positions, 3 blocks), x 2 prompts: 2 * (21 + 21 + 30 + 15) = 174.
    A clean cache of every hook took attention's explicit path, and so does the corrupted
    run; the unpatched metric then needs one plain forward more (2 * 21 positions)."""
    clean, corrupted, answers = prompts()
    names_filter = None if clean_cache_kind == "every hook" else (lambda n: "resid_pre" in n)
    _, clean_cache = model.run_with_cache(clean, names_filter=names_filter)
    blocks = count_positions(monkeypatch, TransformerBlock)
    mlps = count_positions(monkeypatch, MLP)
    result = patching.get_act_patch_resid_pre(
        model, corrupted, clean_cache, LogitDiff(answers), progress=False
    )
    plain_forward = 2 * 21 if clean_cache_kind == "every hook" else 0
    assert blocks[0] == 174 + plain_forward
    # In the last block, the MLP runs at the metric's position only, one per live run. Per
    # prompt: the corrupted run 3 * 7; layer-0 runs 7 + 7 + 2; layer-1 runs 15 + 5; layer-2
    # runs 5. That is 62, x 2 prompts.
    assert mlps[0] == 2 * (21 + 16 + 20 + 5) + plain_forward
    monkeypatch.undo()
    expected = naive_patch(
        model, corrupted, clean_cache, LogitDiff(answers), patching.layer_pos_patch_setter,
        "resid_pre", (3, 7),
    )  # fmt: skip
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)


def test_a_hook_already_on_the_model_acts_in_every_patched_run(model):
    """A hook the caller attached (here, ablating one head at one position, which depends on
    the prompts' layout) is part of every patched run, as in TransformerLens: the sweep
    warns and runs one forward pass per index."""
    clean, corrupted, answers = prompts()
    _, clean_cache = model.run_with_cache(clean)

    def ablate_head_at_position_3(z, hook):
        z[:, 3, 1] = 0
        return z

    metric = LogitDiff(answers, position=-3)
    with model.hooks(fwd_hooks=[("blocks.1.attn.hook_z", ablate_head_at_position_3)]):
        expected = naive_patch(
            model, corrupted, clean_cache, metric, patching.layer_pos_head_vector_patch_setter,
            "z", (3, 7, 4),
        )  # fmt: skip
        with pytest.warns(UserWarning, match=r"blocks\.1\.attn\.hook_z.*one forward pass"):
            result = patching.get_act_patch_attn_head_out_by_pos(
                model, corrupted, clean_cache, metric, progress=False
            )
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)
    assert not any(point.has_hooks for point in model.hook_points())


def test_logit_diff_reads_only_its_answer_columns():
    logits = torch.randn(4, 3, 50, generator=torch.Generator().manual_seed(0))
    answers = torch.tensor([[7, 3], [3, 9], [7, 7], [40, 3]])
    metric = LogitDiff(answers)
    assert metric.vocab.tolist() == [3, 7, 9, 40]
    expected = logits[:, -1].gather(1, answers[:, :1]) - logits[:, -1].gather(1, answers[:, 1:])
    torch.testing.assert_close(metric(logits), expected[:, 0])
    # score() takes just the vocab's columns, which is all the engine unembeds.
    torch.testing.assert_close(metric.score(logits[:, -1:, metric.vocab]), expected[:, 0])
    picked = FunctionMetric(lambda columns: columns[:, -1, 1], vocab=[3, 7])
    torch.testing.assert_close(picked(logits), logits[:, -1, 7])


def test_what_a_plain_metric_reads_is_found_and_checked():
    logits = torch.randn(2, 6, 50, generator=torch.Generator().manual_seed(0))

    def reads(metric):
        found = infer_metric_reads(metric, logits)
        return None if found is None else (found.positions, found.vocab)

    found = reads(lambda x: (x[:, -1, 42] - x[:, -1, 7]).mean())
    assert found[0] == (5,) and found[1].tolist() == [7, 42]
    assert reads(lambda x: x[:, -1].log_softmax(-1)[:, 3].mean()) == ((5,), None)
    assert reads(lambda x: x[:, 1:3].log_softmax(-1)[..., 3].mean()) == ((1, 2), None)
    # No gradient to follow: the last position is tried, and the NaN check accepts it.
    assert reads(lambda x: (x[:, -1, 42] > 0).float().mean()) == ((5,), None)
    # Reads everything (or the check fails): the metric gets every logit.
    assert reads(lambda x: x.mean()) is None
    assert reads(lambda x: (x.nan_to_num(0.0) > 0).float().sum()) is None


def test_plain_metrics_get_full_size_logits_with_what_they_read(model):
    """A TransformerLens-style metric that indexes absolute positions works unchanged."""
    clean, corrupted, answers = prompts()
    _, clean_cache = model.run_with_cache(clean)

    def metric(logits):  # reads position 4 (of 7) and two columns
        return (logits[:, 4, 11] - logits[:, 4, 30]).mean()

    expected = naive_patch(
        model, corrupted, clean_cache, metric, patching.layer_pos_patch_setter, "mlp_out", (3, 7)
    )
    result = patching.get_act_patch_mlp_out(model, corrupted, clean_cache, metric, progress=False)
    torch.testing.assert_close(result.as_subclass(torch.Tensor), expected, atol=1e-4, rtol=0)


def test_finding_what_a_metric_reads_survives_metrics_that_refuse_the_probes():
    logits = torch.randn(2, 6, 50, generator=torch.Generator().manual_seed(0))

    def numpy_metric(x):  # fails on a tensor that requires grad: no gradient hint
        return float(x[:, -1, 3].numpy().mean())

    def finite_only(x):  # refuses NaN: every logit is given
        assert torch.isfinite(x).all()
        return x[:, -1, 3].mean()

    found = infer_metric_reads(numpy_metric, logits)
    assert (found.positions, found.vocab) == ((5,), None)
    assert infer_metric_reads(finite_only, logits) is None
