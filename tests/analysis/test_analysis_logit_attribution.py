"""Direct logit attribution sums to the model's own logit difference."""

from __future__ import annotations

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.analysis import direct_logit_attribution, repeated_random_tokens
from tests.support.induction_circuit import INDUCTION_HEAD, planted_induction_model
from tests.support.tolerances import model_tolerance, sum_tolerance


def random_model(attn_only: bool, normalization_type: str | None) -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=2,
        d_model=32,
        n_heads=4,
        d_vocab=40,
        n_ctx=16,
        attn_only=attn_only,
        normalization_type=normalization_type,
        seed=0,
        init_range=0.2,
    )
    model = HookedTransformer(cfg).eval()
    with torch.no_grad():  # random biases and norm weights, so the bias term is exercised
        for name, param in model.named_parameters():
            if not name.split(".")[-1].startswith("W_"):
                param.add_(0.1 * torch.randn_like(param))
    return model


def attribution_tolerance(dla, d_model: int) -> dict[str, float]:
    """The attributions' total: each a dot product over d_model, summed over the components."""
    return sum_tolerance(dla.attributions, reduction=dla.attributions.shape[0] * d_model)


@pytest.mark.parametrize(
    "attn_only, normalization_type", [(False, "LN"), (True, "LN"), (False, None)]
)
def test_attributions_sum_to_the_logit_difference(attn_only, normalization_type):
    model = random_model(attn_only, normalization_type)
    tokens = torch.randint(0, 40, (3, 8), generator=torch.Generator().manual_seed(0))
    correct, wrong = torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])
    dla = direct_logit_attribution(model, tokens, correct, wrong, pos=-2)
    logits = model(tokens)[:, -2]
    actual = logits.gather(-1, correct[:, None])[:, 0] - logits.gather(-1, wrong[:, None])[:, 0]
    # The cache's run against the model's, then the components' total against the cache's.
    torch.testing.assert_close(dla.logit_diff, actual, **model_tolerance(model.cfg, logits))
    torch.testing.assert_close(
        dla.attributions.sum(0) + dla.bias_term,
        dla.logit_diff,
        **attribution_tolerance(dla, model.cfg.d_model),
    )
    assert dla.head_attributions.shape == (2, 4, 3)
    assert dla.head_labels[1][3] == "L1H3" and dla.labels[7] == "L1H3"
    if attn_only:
        assert dla.mlp_attributions is None
        assert dla.labels[8:] == ["embed", "pos_embed", "bias"]
    else:
        assert dla.mlp_attributions.shape == (2, 3)
        assert dla.labels[8:] == ["0_mlp_out", "1_mlp_out", "embed", "pos_embed", "bias"]
    rows = dla.table()
    assert len(rows) == len(dla.labels) * 3
    assert rows[0] == {
        "component": "L0H0",
        "batch": 0,
        "attribution": dla.attributions[0, 0].item(),
    }


def test_single_token_without_incorrect():
    model = random_model(False, "LN")
    tokens = torch.randint(0, 40, (2, 5), generator=torch.Generator().manual_seed(1))
    dla = direct_logit_attribution(model, tokens, 7)
    logits = model(tokens)[:, -1]
    torch.testing.assert_close(dla.logit_diff, logits[:, 7], **model_tolerance(model.cfg, logits))
    torch.testing.assert_close(
        dla.attributions.sum(0) + dla.bias_term,
        dla.logit_diff,
        **attribution_tolerance(dla, model.cfg.d_model),
    )


def test_planted_induction_head_carries_the_prediction():
    model = planted_induction_model()
    tokens = repeated_random_tokens(30, seq_len=8, batch=4, seed=2)
    # At the last position (second copy of r_8) the answer is r_1... compare with r_2.
    correct, wrong = tokens[:, 0], tokens[:, 1]
    dla = direct_logit_attribution(model, tokens, correct, wrong)
    heads = dla.head_attributions.mean(-1)
    assert divmod(int(heads.argmax()), 3) == INDUCTION_HEAD
    assert heads[INDUCTION_HEAD] > 0.5 * dla.logit_diff.mean()


def test_bad_tokens():
    model = random_model(True, "LN")
    tokens = torch.randint(0, 40, (2, 5))
    with pytest.raises(ValueError, match=r"Token ids must lie in \[0, 40\)"):
        direct_logit_attribution(model, tokens, 40)
