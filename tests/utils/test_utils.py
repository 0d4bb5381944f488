"""interp.utils: get_act_name's shorthand, and TransformerLens's helpers compared with
transformer_lens's own functions on the same inputs."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from transformer_lens import utilities as tl_utils
from transformer_lens.FactoredMatrix import FactoredMatrix as TransformerLensFactoredMatrix
from transformer_lens.utilities import Slice as TransformerLensSlice

from interp import FactoredMatrix, HookedTransformer, HookedTransformerConfig, get_tokenizer, utils
from interp.tokenizers import SymbolTokenizer
from interp.utils import Slice, get_act_name
from tests.support.tolerances import tolerance


@pytest.mark.parametrize(
    "args, expected",
    [
        (("resid_pre", 3), "blocks.3.hook_resid_pre"),
        (("pattern", 0), "blocks.0.attn.hook_pattern"),
        (("attn", 2), "blocks.2.attn.hook_pattern"),
        (("attn_scores", 1), "blocks.1.attn.hook_attn_scores"),
        (("q", 1), "blocks.1.attn.hook_q"),
        (("pre", 4), "blocks.4.mlp.hook_pre"),
        (("mlp_post", 4), "blocks.4.mlp.hook_post"),
        (("scale", 2, "ln1"), "blocks.2.ln1.hook_scale"),
        (("normalized", 0, "ln2"), "blocks.0.ln2.hook_normalized"),
        (("scale",), "ln_final.hook_scale"),
        (("embed",), "hook_embed"),
        (("pos_embed",), "hook_pos_embed"),
        (("resid_pre3",), "blocks.3.hook_resid_pre"),
        (("scale4ln1",), "blocks.4.ln1.hook_scale"),
        (("attn_out", 5), "blocks.5.hook_attn_out"),
        (("blocks.0.attn.hook_z",), "blocks.0.attn.hook_z"),
    ],
)
def test_get_act_name(args, expected):
    assert get_act_name(*args) == expected


# ---------------------------------------- TransformerLens's utils, compared on the same inputs
@pytest.fixture(scope="module")
def gpt2_model():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=32, n_heads=2, d_vocab=50257, n_ctx=32, seed=0, tokenizer_name="gpt2"
    )
    return HookedTransformer(cfg, tokenizer=get_tokenizer("gpt2")).eval()


SLICE_INPUTS = [None, 2, -1, (1, 4), (0, 6, 2), slice(2, None), [0, 3, 4], torch.tensor([4, 1])]
SLICE_INPUTS += [np.array([1, 2]), np.int64(3), torch.tensor(1)]


@pytest.mark.parametrize("value", SLICE_INPUTS, ids=lambda v: type(v).__name__ + str(v))
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_slice_matches_transformer_lens(value, dim):
    x = torch.arange(6 * 6 * 6).reshape(6, 6, 6)
    ours, theirs = Slice(value), TransformerLensSlice(value)
    assert ours.mode == theirs.mode
    torch.testing.assert_close(ours.apply(x, dim), theirs.apply(x, dim), atol=0, rtol=0)
    np.testing.assert_array_equal(ours.indices(6), theirs.indices(6))
    unwrapped, expected = Slice.unwrap(value), TransformerLensSlice.unwrap(value)
    assert unwrapped.mode == expected.mode
    torch.testing.assert_close(unwrapped.apply(x, dim), expected.apply(x, dim), atol=0, rtol=0)
    assert Slice.unwrap(ours) is ours


def test_slice_errors_name_the_input():
    with pytest.raises(ValueError, match=r"Invalid input_slice 'last'"):
        Slice("last")
    with pytest.raises(ValueError, match="max_ctx is needed"):
        Slice((1, 3)).indices()


@pytest.mark.parametrize(
    "value",
    [torch.ones(2, 3), torch.ones(2, dtype=torch.bfloat16), [1, 2], (3.0,), 5, 2.5, True, "a"],
    ids=lambda v: type(v).__name__,
)
def test_to_numpy_matches_transformer_lens(value):
    ours, theirs = utils.to_numpy(value), tl_utils.to_numpy(value)
    assert ours.dtype == theirs.dtype
    np.testing.assert_array_equal(ours, theirs)


def test_tensor_helpers_match_transformer_lens():
    x = torch.randn(4, 5, 6, generator=torch.Generator().manual_seed(0))
    for helper, args in [
        ("get_corner", (x, 2)),
        ("remove_batch_dim", (x[:1],)),
        ("remove_batch_dim", (x,)),
        ("transpose", (x,)),
        ("get_cumsum_along_dim", (x, 1, True)),
        ("get_cumsum_along_dim", (x, -1)),
        ("repeat_along_head_dimension", (x, 3)),
    ]:
        ours, theirs = getattr(utils, helper)(*args), getattr(tl_utils, helper)(*args)
        torch.testing.assert_close(ours, theirs, atol=0, rtol=0)
    lower = torch.tril(torch.ones(3, 3))
    for matrix in [lower, lower.T, torch.ones(2, 3), torch.ones(3), torch.ones(1, 2, 2)]:
        assert utils.is_square(matrix) == tl_utils.is_square(matrix)
        assert utils.is_lower_triangular(matrix) == tl_utils.is_lower_triangular(matrix)
    mask = torch.tensor([[0, 0, 1, 1, 1], [1, 1, 1, 1, 0], [1, 1, 1, 1, 1]])
    for offset in (0, 2):
        expected = tl_utils.get_offset_position_ids(offset, mask)
        torch.testing.assert_close(utils.get_offset_position_ids(offset, mask), expected)
    assert utils.get_device() == tl_utils.get_device()


def test_nested_attr():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    assert utils.get_nested_attr(model, "0.weight") is model[0].weight
    utils.set_nested_attr(model, "0.bias", None)
    assert model[0].bias is None
    utils.set_nested_attr(model, "extra", 3)
    assert model.extra == 3


@pytest.mark.parametrize("shape", [(7,), (8, 12), (4, 16, 8)])
@pytest.mark.parametrize(
    "init, kwargs",
    [
        ("init_xavier_uniform_", {"gain": 1.5}),
        ("init_xavier_normal_", {}),
        ("init_kaiming_uniform_", {"nonlinearity": "relu"}),
        ("init_kaiming_uniform_", {"a": 0.1, "nonlinearity": "leaky_relu", "mode": "fan_out"}),
        ("init_kaiming_normal_", {"nonlinearity": "tanh", "gain": 0.5}),
    ],
)
def test_initialisers_match_transformer_lens(shape, init, kwargs):
    assert utils.calc_fan_in_and_fan_out(torch.empty(shape)) == tl_utils.calc_fan_in_and_fan_out(
        torch.empty(shape)
    )
    torch.manual_seed(0)
    ours = getattr(utils, init)(torch.empty(shape), **kwargs)
    torch.manual_seed(0)
    theirs = getattr(tl_utils, init)(torch.empty(shape), **kwargs)
    # The same random numbers, scaled by a gain / sqrt(fan) computed in another order.
    torch.testing.assert_close(ours, theirs, **tolerance(torch.float32, depth=2, magnitude=theirs))


def test_fan_of_a_scalar_or_4d_tensor_is_a_clear_error():
    with pytest.raises(ValueError, match="scalar"):
        utils.calc_fan_in_and_fan_out(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"shape \(2, 2, 2, 2\)"):
        utils.calc_fan_in_and_fan_out(torch.empty(2, 2, 2, 2))


def test_lm_loss_and_accuracy_match_transformer_lens():
    logits = torch.randn(2, 6, 11, generator=torch.Generator().manual_seed(0))
    tokens = torch.randint(0, 11, (2, 6), generator=torch.Generator().manual_seed(1))
    mask = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    for per_token in (False, True):
        expected = tl_utils.lm_cross_entropy_loss(logits, tokens, per_token=per_token)
        torch.testing.assert_close(
            utils.lm_cross_entropy_loss(logits, tokens, None, per_token), expected
        )
        torch.testing.assert_close(
            utils.lm_accuracy(logits, tokens, per_token),
            tl_utils.lm_accuracy(logits, tokens, per_token),
        )
    expected = tl_utils.lm_cross_entropy_loss(logits, tokens, mask)
    torch.testing.assert_close(utils.lm_cross_entropy_loss(logits, tokens, mask), expected)


def test_composition_scores_match_transformer_lens():
    generator = torch.Generator().manual_seed(0)
    shapes = [(2, 3, 8, 4), (2, 3, 4, 8), (3, 8, 4), (3, 4, 8)]  # OV-like and QK-like
    factors = [torch.randn(shape, generator=generator) for shape in shapes]
    left, right = (FactoredMatrix(*factors[:2]), FactoredMatrix(*factors[2:]))
    expected = tl_utils.composition_scores(
        TransformerLensFactoredMatrix(*factors[:2]), TransformerLensFactoredMatrix(*factors[2:])
    )
    torch.testing.assert_close(utils.composition_scores(left, right), expected)


@pytest.mark.parametrize("padding_side", ["left", "right"])
@pytest.mark.parametrize("prepend_bos", [True, False])
def test_get_attention_mask_matches_transformer_lens(hf_gpt2_tokenizer, padding_side, prepend_bos):
    pad = 50256  # GPT-2's pad = bos = eos
    tokens = torch.tensor([[pad, pad, 15496, 995], [pad, 15496, 995, pad], [15496, 995, pad, pad]])
    hf_gpt2_tokenizer.pad_token = hf_gpt2_tokenizer.eos_token
    expected = tl_utils.get_attention_mask(hf_gpt2_tokenizer, tokens, prepend_bos, padding_side)
    for tokenizer in (hf_gpt2_tokenizer, get_tokenizer("gpt2")):
        actual = utils.get_attention_mask(tokenizer, tokens, prepend_bos, padding_side)
        torch.testing.assert_close(actual, expected, atol=0, rtol=0)


TEXTS = ["The cat sat on the mat.", "", "A second document, rather longer than the first one."]
TEXTS += ["Short.", "Ünïcödé text and numbers 12345 " * 3]


@pytest.mark.parametrize("max_length, add_bos_token", [(8, True), (5, False), (200, True)])
def test_tokenize_and_concatenate_matches_transformer_lens(
    hf_gpt2_tokenizer, max_length, add_bos_token
):
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": TEXTS, "other": list(range(len(TEXTS)))})
    options = dict(max_length=max_length, add_bos_token=add_bos_token, num_proc=None)
    expected = tl_utils.tokenize_and_concatenate(dataset, hf_gpt2_tokenizer, **options)[:]["tokens"]
    ours = utils.tokenize_and_concatenate(dataset, hf_gpt2_tokenizer, **options)
    assert ours.column_names == ["tokens"]
    torch.testing.assert_close(ours[:]["tokens"], expected, atol=0, rtol=0)
    for source in (TEXTS, {"text": TEXTS}):  # plain Python data, our offline tokenizer
        rows = utils.tokenize_and_concatenate(source, get_tokenizer("gpt2"), **options)
        torch.testing.assert_close(rows["tokens"], expected, atol=0, rtol=0)
        batch = next(iter(DataLoader(rows, batch_size=2)))
        torch.testing.assert_close(batch["tokens"], expected[:2], atol=0, rtol=0)


def test_tokenize_and_concatenate_errors():
    with pytest.raises(KeyError, match="column_name='text' is not in the dict"):
        utils.tokenize_and_concatenate({"content": TEXTS}, get_tokenizer("gpt2"))
    symbols = SymbolTokenizer(100, bos_token_id=99)
    with pytest.raises(ValueError, match="has no eos_token_id"):
        utils.tokenize_and_concatenate(TEXTS, symbols)
    with pytest.raises(ValueError, match="leaves no room"):
        utils.tokenize_and_concatenate(TEXTS, get_tokenizer("gpt2"), max_length=1)


@pytest.mark.parametrize(
    "answer, kwargs",
    [
        (" sat", {}),
        ("sat on", {"top_k": 3}),
        (["mat", " dog", "cat"], {}),
        ("x", {"prepend_bos": False}),
    ],
)
def test_test_prompt_prints_what_transformer_lens_prints(gpt2_model, capsys, answer, kwargs):
    tl_utils.test_prompt("The cat", answer, gpt2_model, **kwargs)
    expected = capsys.readouterr().out
    utils.test_prompt("The cat", answer, gpt2_model, **kwargs)
    assert capsys.readouterr().out == expected
    assert "Ranks of the answer tokens" in expected


def test_get_tokens_with_bos_removed_matches_transformer_lens():
    from types import SimpleNamespace

    from interp.utils import USE_DEFAULT_VALUE, get_tokens_with_bos_removed

    assert USE_DEFAULT_VALUE is tl_utils.USE_DEFAULT_VALUE
    left_padded = torch.tensor([[0, 0, 1, 5], [1, 6, 7, 8]])  # pad 0, BOS 1
    shared_padded = torch.tensor([[0, 0, 0, 5], [0, 6, 0, 8]])  # BOS and pad both 0
    cases = [
        (SimpleNamespace(bos_token_id=1, pad_token_id=0, padding_side="left"), left_padded),
        (SimpleNamespace(bos_token_id=1, pad_token_id=0, padding_side="right"), left_padded),
        (SimpleNamespace(bos_token_id=0, pad_token_id=0, padding_side="left"), shared_padded),
        (SimpleNamespace(bos_token_id=None, pad_token_id=0, padding_side="left"), left_padded),
    ]
    for tokenizer, tokens in cases:
        ours = get_tokens_with_bos_removed(tokenizer, tokens)
        assert torch.equal(ours, tl_utils.get_tokens_with_bos_removed(tokenizer, tokens))
    assert get_tokens_with_bos_removed(cases[0][0], left_padded).tolist() == [[0, 0, 5], [6, 7, 8]]
