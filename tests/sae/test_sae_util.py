"""SAELens's ``sae_lens.util`` helpers and ``sae_lens.constants`` at ``interp.sae``."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from interp.sae.constants import DTYPE_MAP, DTYPE_TO_STR
from interp.sae.util import (
    cosine_similarities,
    dtype_to_str,
    extract_layer_from_tlens_hook_name,
    extract_stop_at_layer_from_tlens_hook_name,
    get_special_token_ids,
    path_or_tmp_dir,
    str_to_dtype,
    temporary_seed,
)
from tests.support.tolerances import tolerance


@pytest.mark.parametrize(
    ("hook_name", "layer"),
    [
        ("blocks.30.hook_resid_post", 30),
        ("blocks.2.attn.hook_z", 2),
        ("model.language_model.layers.7", 7),
        ("hook_embed", None),
        ("blocks.x3.hook_resid_pre", None),
    ],
)
def test_layer_of_a_hook_name(hook_name, layer):
    assert extract_layer_from_tlens_hook_name(hook_name) == layer
    stop = extract_stop_at_layer_from_tlens_hook_name(hook_name)
    assert stop == (None if layer is None else layer + 1)


def test_temporary_seed_seeds_inside_and_restores_outside():
    torch.manual_seed(0)
    state = torch.get_rng_state()
    with temporary_seed(5):
        inside = torch.rand(3)
    assert torch.equal(torch.get_rng_state(), state)
    torch.manual_seed(5)
    assert torch.equal(inside, torch.rand(3))
    with temporary_seed(None):
        torch.rand(1)
    assert not torch.equal(torch.get_rng_state(), state)  # None: the global generator ran


def test_path_or_tmp_dir(tmp_path):
    with path_or_tmp_dir(tmp_path / "given") as path:
        assert path == tmp_path / "given"
    with path_or_tmp_dir(None) as temporary:
        assert temporary.is_dir()
    assert not temporary.exists()


def test_special_token_ids_are_the_structural_ones():
    tokenizer = SimpleNamespace(bos_token_id=1, eos_token_id=2, pad_token_id=2, sep_token_id=None)
    assert sorted(get_special_token_ids(tokenizer)) == [1, 2]


def test_cosine_similarities_match_torch():
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 6, generator=generator), torch.randn(3, 6, generator=generator)
    expected = torch.nn.functional.cosine_similarity(a[:, None], b[None], dim=-1)  # [4, 3]
    torch.testing.assert_close(
        cosine_similarities(a, b), expected, **tolerance(torch.float32, reduction=6)
    )
    torch.testing.assert_close(
        cosine_similarities(a).diagonal(), torch.ones(4), **tolerance(torch.float32, reduction=6)
    )
    assert cosine_similarities(torch.zeros(1, 6), b).eq(0).all()


def test_dtype_names_round_trip():
    for name, dtype in DTYPE_MAP.items():
        assert str_to_dtype(name) is dtype
        assert DTYPE_TO_STR[dtype] == name.removeprefix("torch.")


@pytest.mark.parametrize("name", ["int32", "torch.int32", "FLOAT32", ""])
def test_str_to_dtype_refuses_what_saelens_refuses(name):
    with pytest.raises(ValueError, match="Invalid dtype"):
        str_to_dtype(name)


def test_dtype_to_str_names_only_sae_dtypes():
    assert dtype_to_str(torch.bfloat16) == "bfloat16"
    with pytest.raises(ValueError, match="Invalid dtype"):
        dtype_to_str(torch.int8)
