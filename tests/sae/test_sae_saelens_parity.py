"""Our SAEs and splicing against SAELens's outputs on the same weights.

The fixtures in tests/sae_reference/ were written by SAELens itself (the version is in
make_fixtures.py, which regenerates them in a separate environment): random SAEs of each
architecture saved with ``save_model``, SAELens's ``encode``/``decode``/``forward`` on one
input, and a tiny random GPT-2 with SAEs spliced by SAELens's ``HookedSAETransformer``.
"""

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from interp import HookedTransformer
from interp.sae import HookedSAETransformer, load_sae
from tests.support.tolerances import model_tolerance, tolerance

REFERENCE = Path(__file__).parents[1] / "sae_reference"
ARCHITECTURES = sorted(
    p.name for p in (REFERENCE / "saes").iterdir() if (p / "expected.safetensors").exists()
)


def sae_tolerance(sae, expected: torch.Tensor) -> dict[str, float]:
    """An SAE's encoder and decoder (sums over d_in and d_sae), ours against SAELens's."""
    widest = max(sae.cfg.d_in, sae.cfg.d_sae)
    return tolerance(torch.float32, reduction=widest, depth=2, magnitude=expected)


def test_every_architecture_has_a_fixture():
    assert {"standard", "jumprelu", "topk", "gated", "transcoder", "skip_transcoder"} <= set(
        ARCHITECTURES
    )


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_encode_decode_forward_equal_saelens(name):
    expected = load_file(REFERENCE / "saes" / name / "expected.safetensors")
    sae = load_sae(REFERENCE / "saes" / name)
    x = expected["input"]
    with torch.no_grad():
        acts = sae.encode(x)
        want = expected["feature_acts"]
        torch.testing.assert_close(acts, want, **sae_tolerance(sae, want))
        assert (acts > 0).sum() > 0  # the comparison is not between two zero tensors
        want = expected["decode"]
        torch.testing.assert_close(sae.decode(acts), want, **sae_tolerance(sae, want))
        want = expected["forward"]
        torch.testing.assert_close(sae(x), want, **sae_tolerance(sae, want))


@pytest.fixture(scope="module")
def spliced():
    model = HookedSAETransformer.from_pretrained_no_processing(str(REFERENCE / "gpt2"))
    saes = [load_sae(REFERENCE / "saes" / name) for name in ("spliced_resid", "spliced_hook_z")]
    return model.eval(), saes, load_file(REFERENCE / "spliced_gpt2.safetensors")


def test_the_same_gpt2_as_saelens(spliced):
    model, _, expected = spliced
    with torch.no_grad():
        logits = model(expected["tokens"])
    want = expected["logits"]
    torch.testing.assert_close(logits, want, **model_tolerance(model.cfg, want))
    assert isinstance(model, HookedTransformer)


@pytest.mark.parametrize("suffix", ["", "_error_term"])
def test_spliced_logits_and_features_equal_saelens(spliced, suffix):
    model, saes, expected = spliced
    with torch.no_grad():
        logits, cache = model.run_with_cache_with_saes(
            expected["tokens"], saes=saes, use_error_term=bool(suffix)
        )
    widths = tuple(sae.cfg.d_sae for sae in saes)
    want = expected["spliced_logits" + suffix]
    torch.testing.assert_close(logits, want, **model_tolerance(model.cfg, want, spliced=widths))
    for key, name in (
        ("resid_acts", "blocks.1.hook_resid_post.hook_sae_acts_post"),
        ("hook_z_acts", "blocks.0.attn.hook_z.hook_sae_acts_post"),
    ):
        want = expected[key + suffix]
        torch.testing.assert_close(
            cache[name], want, **model_tolerance(model.cfg, want, spliced=widths)
        )
    if not suffix:  # splicing without the error term changes the logits
        assert (logits - expected["logits"]).abs().max() > 1e-2
    assert not model.acts_to_saes
