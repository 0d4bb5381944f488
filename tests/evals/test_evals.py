"""interp.evals against transformer_lens.evals: the same IOI samples, the same losses and
logit differences on the same model; the hub loaders fail offline with a message saying so."""

from __future__ import annotations

import pytest
import torch
from transformer_lens import evals as tl_evals

from interp import HookedTransformer, HookedTransformerConfig, evals, get_tokenizer
from tests.support.tolerances import error_bound, model_tolerance


@pytest.fixture(scope="module")
def model() -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_vocab=50257, n_ctx=80, seed=0
    )
    return HookedTransformer(cfg, tokenizer=get_tokenizer("gpt2")).eval()


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize(
    "options",
    [{}, {"names": ["Alice", "Bob", "Carol"], "nouns": {"OBJECT": ["ball"]}, "prepend_bos": False}],
)
def test_ioi_dataset_matches_transformer_lens(hf_gpt2_tokenizer, symmetric, options):
    expected = tl_evals.IOIDataset(
        hf_gpt2_tokenizer, num_samples=20, symmetric=symmetric, seed=3, **options
    )
    for tokenizer in (hf_gpt2_tokenizer, get_tokenizer("gpt2")):
        ours = evals.IOIDataset(tokenizer, num_samples=20, symmetric=symmetric, seed=3, **options)
        assert ours.samples == expected.samples and len(ours) == len(expected)
        for index in range(len(ours)):
            for key, value in expected[index].items():
                torch.testing.assert_close(ours[index][key], value, atol=0, rtol=0)


def test_ioi_eval_matches_transformer_lens(model, hf_gpt2_tokenizer):
    dataset = evals.IOIDataset(get_tokenizer("gpt2"), num_samples=24, symmetric=True, seed=0)
    ours = evals.ioi_eval(model, dataset, batch_size=5)
    reference_dataset = tl_evals.IOIDataset(
        hf_gpt2_tokenizer, num_samples=24, symmetric=True, seed=0
    )
    expected = tl_evals.ioi_eval(model, reference_dataset, batch_size=5)
    assert ours.keys() == expected.keys()
    assert ours["Accuracy"] == expected["Accuracy"]
    # Padded batches of other shapes: a whole forward's error on logits of the prompts' size.
    logits = torch.cat([model(dataset[i]["prompt"][None])[0] for i in range(5)])
    bound = model_tolerance(model.cfg, logits)["atol"]
    assert ours["Logit Difference"] == pytest.approx(expected["Logit Difference"], abs=2 * bound)


@pytest.mark.parametrize("prepend_bos", [None, False])
def test_induction_loss_matches_transformer_lens(model, prepend_bos):
    torch.manual_seed(0)
    ours = evals.induction_loss(model, batch_size=2, subseq_len=20, prepend_bos=prepend_bos)
    torch.manual_seed(0)
    expected = tl_evals.induction_loss(
        model, batch_size=2, subseq_len=20, prepend_bos=prepend_bos, device="cpu"
    )
    torch.testing.assert_close(ours, expected)


def test_induction_loss_on_a_small_vocabulary_and_the_shipped_induction_model():
    import interp

    model = interp.load_model("attn-only-2l")
    assert model.cfg.d_vocab < 20000  # TransformerLens's range [100, 20000) would not fit
    torch.manual_seed(0)
    loss = evals.induction_loss(model, batch_size=4, subseq_len=model.cfg.n_ctx // 2)
    uniform = torch.log(torch.tensor(float(model.cfg.d_vocab)))
    assert loss < 0.25 * uniform  # induction heads predict the repeated half


def test_sanity_check_is_the_loss_on_the_paragraph(model):
    expected = tl_evals.sanity_check(model)
    torch.testing.assert_close(evals.sanity_check(model), expected)


@pytest.mark.parametrize(
    "loader, dataset",
    [
        ("make_wiki_data_loader", "wikitext"),
        ("make_owt_data_loader", "stas/openwebtext-10k"),
        ("make_pile_data_loader", "NeelNanda/pile-10k"),
        ("make_code_data_loader", "codeparrot/codeparrot-valid-v2-near-dedup"),
    ],
)
def test_hub_loaders_say_they_need_the_network(monkeypatch, loader, dataset):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError(f"Couldn't reach '{args[0]}' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ConnectionError, match=rf"{loader} downloads the '{dataset}' dataset .*"
                       "needs the network"):  # fmt: skip
        getattr(evals, loader)(get_tokenizer("gpt2"))


def test_evaluate_on_dataset_is_the_mean_batch_loss(model):
    tokens = torch.randint(0, 50257, (6, 10), generator=torch.Generator().manual_seed(0))
    loader = [{"tokens": tokens[:3]}, {"tokens": tokens[3:]}]
    expected = tl_evals.evaluate_on_dataset(model, loader, device="cpu")
    # The same forwards, averaged in another order: a mean of tokens.numel() losses.
    bound = error_bound(torch.float32, reduction=tokens.numel(), magnitude=expected)
    assert evals.evaluate_on_dataset(model, loader) == pytest.approx(expected, abs=bound)
    assert evals.evaluate_on_dataset(model, loader, truncate=0) == pytest.approx(
        model(tokens[:3], return_type="loss").item(), abs=bound
    )
