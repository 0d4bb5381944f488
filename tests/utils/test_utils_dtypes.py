"""interp.utils.dtypes.parse_dtype, the one dtype parser: every spelling any of its callers
took (torch dtypes, torch's names with or without ``torch.``, harvesting's short names), and
one error message naming the argument and the fix, through each caller."""

import pytest
import torch

from interp import HookedTransformerConfig
from interp.harvest.harvester import stored_dtype
from interp.loading.checkpoint import resolve_dtype
from interp.sae.sae import str_to_dtype
from interp.utils.dtypes import DTYPE_ALIASES, dtype_name, parse_dtype


@pytest.mark.parametrize(
    "spelling, expected",
    [
        (torch.bfloat16, torch.bfloat16),
        ("bfloat16", torch.bfloat16),
        ("torch.float16", torch.float16),
        ("float", torch.float32),
        ("int8", torch.int8),
        ("bf16", torch.bfloat16),
        ("fp16", torch.float16),
        ("fp32", torch.float32),
        ("fp64", torch.float64),
    ],
)
def test_every_spelling_reads_as_its_dtype(spelling, expected):
    assert parse_dtype(spelling) is expected


@pytest.mark.parametrize("bad", ["float33", "tensor", "", 5, None, torch.float32.__class__])
def test_what_is_no_dtype_is_named_with_the_fix(bad):
    with pytest.raises(ValueError) as error:
        parse_dtype(bad, "--dtype")
    assert str(error.value) == (
        f"--dtype={bad!r} is not a torch dtype; use e.g. 'float32', 'bfloat16' or 'float16'."
    )


def test_a_dtype_the_caller_does_not_take_names_the_ones_it_does():
    with pytest.raises(ValueError, match=r"SAE dtype='int8' is torch.int8, not one this takes; "):
        str_to_dtype("int8")
    with pytest.raises(ValueError, match=r"use one of float32, float16, bfloat16\.$"):
        stored_dtype("float64", model=None)


def test_each_caller_reads_the_short_names_and_torch_names():
    assert (
        HookedTransformerConfig(
            n_layers=1, d_model=4, n_ctx=4, d_head=2, act_fn="relu", dtype="bf16"
        ).dtype
        is torch.bfloat16
    )
    assert resolve_dtype("torch.float16", torch.float32) is torch.float16
    assert str_to_dtype("fp16") is torch.float16
    assert stored_dtype("torch.bfloat16", model=None) is torch.bfloat16
    assert stored_dtype(torch.float64, model=None) is torch.float64  # any dtype, from Python


def test_names_round_trip():
    for dtype in (*DTYPE_ALIASES.values(), torch.int8):
        assert parse_dtype(dtype_name(dtype)) is dtype
