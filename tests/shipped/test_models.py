"""Tests for interp/models: the shipped checkpoints do what their model cards say."""

import math
import re
from importlib import resources
from pathlib import Path

import pytest
import torch

import interp
from interp.models import model_card
from interp.tokenizers import CharTokenizer
from interp.train import default_text, sample_text
from tests.support.tolerances import model_error_bound, model_tolerance

MODELS_FOLDER = Path(str(resources.files("interp.models")))


@pytest.fixture(scope="module")
def shakespeare():
    return interp.load_model("shakespeare-char")


@pytest.fixture(scope="module")
def attn_only():
    return interp.load_model("attn-only-2l")


def card_number(name: str, label: str) -> float:
    """The number after ``label`` in the model card (e.g. "Validation loss: **1.6612**")."""
    match = re.search(re.escape(label) + r"[^0-9]*([0-9]+\.[0-9]+)", model_card(name))
    assert match, f"{label!r} not found in the {name} card"
    return float(match.group(1))


def test_registry_lists_and_loads_the_shipped_models():
    assert interp.list_models() == ["attn-only-2l", "shakespeare-char"]
    for name in interp.list_models():
        folder = MODELS_FOLDER / name
        assert (folder / "MODEL_CARD.md").is_file()
        assert (folder / "model.safetensors").stat().st_size < 5_000_000
        model = interp.load_model(name)
        assert model.cfg.model_name == name
        assert not any(p.device.type == "meta" for p in model.parameters())


def test_unknown_name_suggests_the_closest():
    with pytest.raises(ValueError, match="did you mean 'shakespeare-char'"):
        interp.load_model("shakespeare_char")


def test_dtype_on_load():
    model = interp.load_model("attn-only-2l", dtype=torch.bfloat16)
    assert all(p.dtype == torch.bfloat16 for p in model.parameters())


# -------------------------------------------------------------------------- shakespeare-char
def held_out_text() -> str:
    text = default_text()
    return text[int(len(text) * 0.9) :]


def test_character_tokenizer_round_trips(shakespeare):
    assert isinstance(shakespeare.tokenizer, CharTokenizer)
    text = "ROMEO:\nBut soft, what light?"
    tokens = shakespeare.to_tokens(text)
    assert tokens.shape == (1, len(text))  # one token a character, no BOS
    assert shakespeare.to_str_tokens(text) == list(text)
    assert shakespeare.to_string(tokens[0]) == text


def test_validation_loss_is_what_the_card_says(shakespeare):
    """Recomputed here, independently of interp.train: every held-out character after the
    first, predicted from the window of n_ctx - 1 characters it ends."""
    ids = torch.tensor(shakespeare.tokenizer.encode(held_out_text()))
    n_ctx = shakespeare.cfg.n_ctx
    total, count, largest = 0.0, 0, 0.0
    with torch.no_grad():
        starts = list(range(0, len(ids) - 1, n_ctx - 1))
        for first in range(0, len(starts), 128):
            windows = [ids[s : s + n_ctx] for s in starts[first : first + 128]]
            for group in [torch.stack([w for w in windows if len(w) == n_ctx])] + [
                w[None] for w in windows if len(w) != n_ctx
            ]:
                logits = shakespeare(group)
                largest = max(largest, logits.abs().max().item())
                log_probs = logits.log_softmax(-1)[:, :-1]
                picked = log_probs.gather(-1, group[:, 1:, None])
                total -= picked.double().sum().item()
                count += picked.numel()
    assert count == len(ids) - 1
    val_loss = total / count
    # Recorded by another run (other batches, maybe another machine): a loss moves by twice its
    # logits' error; the card prints 4 decimals, half a step off at most besides.
    bound = 2 * model_error_bound(shakespeare.cfg, largest)
    assert val_loss == pytest.approx(shakespeare.cfg.extra["val_loss"], abs=bound)
    card = card_number("shakespeare-char", "Validation loss")
    assert val_loss == pytest.approx(card, abs=0.5e-4 + bound)
    assert val_loss < math.log(shakespeare.cfg.d_vocab) / 2  # far better than uniform


def test_samples_look_like_shakespeare(shakespeare):
    """Three seeded samples: most words are words of the plays, and speakers are named on
    lines of their own ("ROMEO:")."""
    known_words = set(re.findall(r"[a-z']+", default_text().lower()))
    samples = [sample_text(shakespeare, "\n", 600, seed=seed) for seed in range(3)]
    words = [w for sample in samples for w in re.findall(r"[a-z']+", sample.lower())]
    assert len(words) > 200
    real = sum(w in known_words for w in words) / len(words)
    assert real > 0.75, (real, samples)
    speaker_lines = [
        line
        for sample in samples
        for line in sample.split("\n")
        if re.fullmatch(r"[A-Z][A-Za-z ]+:", line)
    ]
    assert len(speaker_lines) >= 3, samples


def test_card_gives_the_reproducing_command():
    card = model_card("shakespeare-char")
    assert "python -m interp.train shakespeare-char" in card
    assert str(interp.load_model("shakespeare-char").cfg.extra["seed"]) in card


# ------------------------------------------------------------------------------ attn-only-2l
def repeated_random_tokens(model, half_length=30, batch=100, seed=0):
    """BOS (the last token id), then random tokens, then the same tokens again."""
    generator = torch.Generator().manual_seed(seed)
    bos = model.cfg.d_vocab - 1
    half = torch.randint(0, bos, (batch, half_length), generator=generator)
    return torch.cat([torch.full((batch, 1), bos), half, half], dim=1)


def head_scores(model, tokens, half_length):
    """Induction and previous-token scores [layer, head] straight from the cached patterns."""
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: name.endswith("pattern"))
    second_copy = torch.arange(1 + half_length, tokens.shape[1])
    every = torch.arange(1, tokens.shape[1])
    induction = torch.stack(
        [
            cache["pattern", layer][:, :, second_copy, second_copy - half_length + 1].mean((0, 2))
            for layer in range(model.cfg.n_layers)
        ]
    )
    previous = torch.stack(
        [
            cache["pattern", layer][:, :, every, every - 1].mean((0, 2))
            for layer in range(model.cfg.n_layers)
        ]
    )
    return induction, previous


def test_attn_only_has_canonical_induction_and_previous_token_heads(attn_only):
    assert attn_only.cfg.attn_only and attn_only.cfg.n_layers == 2
    half_length = 30
    induction, previous = head_scores(
        attn_only, repeated_random_tokens(attn_only, half_length), half_length
    )
    assert induction[1].max() >= 0.8, induction
    assert previous[0].max() >= 0.8, previous


def test_attn_only_card_figures_are_reproduced(attn_only):
    """The card's probe: BOS + 25 random tokens twice, 200 sequences, seed 1234."""
    from interp.train import repeated_sequence

    tokens = repeated_sequence(200, 25, attn_only.cfg.d_vocab, seed=1234)
    induction, previous = head_scores(attn_only, tokens, 25)
    extra = attn_only.cfg.extra
    # Recorded by another run: scores are fractions of attention (at most 1) of its forward.
    within = model_tolerance(attn_only.cfg, 1.0)
    torch.testing.assert_close(induction, torch.tensor(extra["induction_scores"]), **within)
    torch.testing.assert_close(previous, torch.tensor(extra["previous_token_scores"]), **within)
    logits = attn_only(tokens)
    losses = -logits.log_softmax(-1)[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    second_copy_loss = losses[:, 26:50].mean().item()
    bound = 2 * model_error_bound(attn_only.cfg, logits.abs().max())  # twice the logits'
    assert second_copy_loss == pytest.approx(extra["second_copy_loss"], abs=bound)
    assert second_copy_loss == pytest.approx(
        card_number("attn-only-2l", "Loss on the second copy"), abs=1e-3
    )
    card = model_card("attn-only-2l")
    best_layer1 = max(extra["induction_scores"][1])
    assert f"{best_layer1:.3f}" in card


# The checkpoint before issue 13 scored 0.005 here (L0H0 at positions 51-63).
PREVIOUS_TOKEN_FLOOR = 0.85
INDUCTION_FLOOR = 0.85


def card_position_minima(label: str) -> tuple[float, float]:
    """The two minima on the card's per-position row that starts with ``label``."""
    row = next(line for line in model_card("attn-only-2l").splitlines() if line.startswith(label))
    numbers = re.findall(r"\*\*([0-9]+\.[0-9]+)\*\*", row)
    assert len(numbers) == 2, row
    return float(numbers[0]), float(numbers[1])


@pytest.mark.parametrize(
    ("half_length", "length", "label"),
    [(31, 63, "| BOS + 31 random tokens twice"), (32, 64, "| BOS + 32 random tokens, then")],
)
def test_attn_only_heads_work_at_every_position(attn_only, half_length, length, label):
    """Issue 13: L0H0 once attended to the previous token only up to position 50. Each
    position's score is recomputed here in a plain loop, then its minimum is compared with
    the card (3 decimals) and the checkpoint's figures, and held to a floor."""
    from interp.train import repeated_sequence

    tokens = repeated_sequence(500, half_length, attn_only.cfg.d_vocab, seed=1234)[:, :length]
    assert tokens.shape[1] == length <= attn_only.cfg.n_ctx
    with torch.no_grad():
        _, cache = attn_only.run_with_cache(tokens, names_filter=lambda n: n.endswith("pattern"))
    previous_token = cache["pattern", 0][:, 0]  # L0H0 [batch, query_pos, key_pos]
    induction = cache["pattern", 1][:, 0]  # L1H0
    previous = [previous_token[:, q, q - 1].mean().item() for q in range(1, length)]
    after_first = [
        induction[:, q, q - half_length + 1].mean().item() for q in range(1 + half_length, length)
    ]
    card_previous, card_induction = card_position_minima(label)
    assert min(previous) == pytest.approx(card_previous, abs=1e-3)
    assert min(after_first) == pytest.approx(card_induction, abs=1e-3)
    figures = next(f for f in attn_only.cfg.extra["position_minima"] if f["length"] == length)
    bound = model_error_bound(attn_only.cfg, 1.0)  # fractions of attention, recorded elsewhere
    assert min(previous) == pytest.approx(figures["previous_token_scores"][0][0], abs=bound)
    assert min(after_first) == pytest.approx(figures["induction_scores"][1][0], abs=bound)
    assert min(previous) > PREVIOUS_TOKEN_FLOOR, previous
    assert min(after_first) > INDUCTION_FLOOR, after_first
