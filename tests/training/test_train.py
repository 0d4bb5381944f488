"""Tests for interp/train.py: deterministic recipes, the data they train on, and the CLI."""

import math
from pathlib import Path

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading.native import load_native
from interp.tokenizers import CharTokenizer
from interp.train import (
    RECIPES,
    copied_segment_batch,
    default_text,
    induction_figures,
    lr_at,
    main,
    make_optimizer,
    split_text,
    text_batch,
    text_loss,
    train,
)
from tests.support.tolerances import model_error_bound

SHARED_TEXT = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "tinyshakespeare.txt"
# A short text keeps the held-out evaluation of these short runs cheap.
SHORT_TEXT = default_text()[:20_000]
SMALL_TEXT_MODEL = dict(n_layers=1, d_model=32, n_heads=2, n_ctx=32)


def state_dicts_equal(a: HookedTransformer, b: HookedTransformer) -> bool:
    sd_a, sd_b = a.state_dict(), b.state_dict()
    return sd_a.keys() == sd_b.keys() and all(torch.equal(sd_a[k], sd_b[k]) for k in sd_a)


def test_same_seed_gives_bit_identical_weights_and_figures():
    """The shipped recipe itself (full-size model), shortened to a few steps."""
    first = train("shakespeare-char", text=SHORT_TEXT, steps=6, progress=False)
    again = train("shakespeare-char", text=SHORT_TEXT, steps=6, progress=False)
    other_seed = train("shakespeare-char", text=SHORT_TEXT, steps=6, seed=7, progress=False)
    assert state_dicts_equal(first, again)
    assert first.cfg.extra["val_loss"] == again.cfg.extra["val_loss"]
    assert first.cfg.extra["final_train_loss"] == again.cfg.extra["final_train_loss"]
    assert not state_dicts_equal(first, other_seed)
    assert first.cfg.extra["seed"] == RECIPES["shakespeare-char"].seed
    assert other_seed.cfg.extra["seed"] == 7


def test_attn_only_recipe_is_deterministic():
    first = train("attn-only-2l", steps=4, progress=False)
    again = train("attn-only-2l", steps=4, progress=False)
    assert state_dicts_equal(first, again)
    assert first.cfg.attn_only
    assert first.cfg.extra["induction_scores"] == again.cfg.extra["induction_scores"]


def test_training_lowers_the_loss_on_your_own_text():
    text = "the cat sat on the mat. " * 200
    model = train(
        "shakespeare-char",
        text=text,
        steps=60,
        progress=False,
        config=SMALL_TEXT_MODEL,
        warmup_steps=10,
        lr=1e-2,
        min_lr=1e-3,
    )
    assert model.tokenizer.chars == sorted(set(text))
    assert model.cfg.extra["val_loss"] < 0.5 * math.log(len(set(text)))
    assert model.cfg.d_vocab == len(set(text))


def test_text_loss_matches_a_naive_loop():
    tokenizer = CharTokenizer(sorted(set(SHORT_TEXT)))
    cfg = HookedTransformerConfig(d_vocab=tokenizer.vocab_size, seed=0, **SMALL_TEXT_MODEL)
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    text = SHORT_TEXT[:500]
    tokens = tokenizer.encode(text)
    n_ctx = cfg.n_ctx
    # Predict token i from the (at most n_ctx - 1) tokens of its window, window by window.
    naive, largest = [], 0.0
    for start in range(0, len(tokens) - 1, n_ctx - 1):
        window = torch.tensor(tokens[start : start + n_ctx])[None]
        logits = model(window)
        largest = max(largest, logits.abs().max().item())
        log_probs = logits.log_softmax(-1)[0]
        for i in range(window.shape[1] - 1):
            naive.append(-log_probs[i, window[0, i + 1]].item())
    assert len(naive) == len(tokens) - 1
    # Batches of 3 windows against one at a time: a loss moves by twice its logits' error.
    bound = 2 * model_error_bound(model.cfg, largest)
    assert text_loss(model, text, batch_size=3) == pytest.approx(sum(naive) / len(naive), abs=bound)


def test_split_and_batches():
    train_text, val_text = split_text(SHORT_TEXT)
    assert train_text + val_text == SHORT_TEXT
    assert len(val_text) == pytest.approx(0.1 * len(SHORT_TEXT), abs=1)
    tokens = torch.arange(1000)
    batch = text_batch(tokens, 8, 16, torch.Generator().manual_seed(0))
    assert batch.shape == (8, 16)
    assert torch.equal(batch - batch[:, :1], torch.arange(16).expand(8, 16))  # contiguous windows


@pytest.mark.skipif(not SHARED_TEXT.exists(), reason="needs ../shared/data/tinyshakespeare.txt")
def test_shipped_text_is_tiny_shakespeare():
    assert default_text() == SHARED_TEXT.read_text(encoding="utf-8")


def copy_distance(row: list[int], kept: list[int]) -> int | None:
    """The smallest distance d >= 1 at which every token of the copy (the predictions
    ``kept`` and the token after the last) repeats the token d places before, read from
    position 1 or later; None if there is none."""
    copy = range(kept[0], kept[-1] + 2)
    for distance in range(1, kept[0]):
        if all(row[t] == row[t - distance] for t in copy):
            return distance
    return None


def test_copied_segment_batch_copies_one_segment_and_masks_the_rest():
    d_vocab, length = 50, 40
    generator = torch.Generator().manual_seed(0)
    tokens, loss_mask = copied_segment_batch(256, length, d_vocab, generator, 4, 10)
    assert tokens.shape == (256, length) and loss_mask.shape == (256, length - 1)
    assert (tokens[:, 0] == d_vocab - 1).all() and (tokens[:, 1:] < d_vocab - 1).all()
    distances, overlapping = [], 0
    for row, mask in zip(tokens.tolist(), loss_mask.tolist(), strict=True):
        # The mask covers predictions j -> j + 1 inside the copy: a run of segment - 1 ones.
        kept = [j for j, m in enumerate(mask) if m]
        assert 3 <= len(kept) <= 9 and kept == list(range(kept[0], kept[-1] + 1))
        distance = copy_distance(row, kept)
        assert distance is not None, (row, mask)
        distances.append(distance)
        overlapping += distance < len(kept) + 1  # the copy overlaps its source
    assert 1 in distances and max(distances) > 10  # runs of one token and distant copies
    assert 0 < overlapping < 256


def test_copied_segments_cover_every_position():
    """Every position is, in some rows, the one after a copied token's source (where the
    induction head reads, so the previous-token head must work there) and a loss position."""
    length = 65
    tokens, loss_mask = copied_segment_batch(
        4096, length, 512, torch.Generator().manual_seed(0), **RECIPES["attn-only-2l"].data_options
    )
    read = torch.zeros(length, dtype=torch.bool)
    for row, mask in zip(tokens.tolist(), loss_mask.tolist(), strict=True):
        kept = [j for j, m in enumerate(mask) if m]
        distance = copy_distance(row, kept)
        read[[j - distance + 1 for j in kept]] = True
    assert read[2 : length - 1].all()  # key positions 2 .. n_ctx - 1 (the model reads 64 tokens)
    assert (loss_mask.sum(0) > 0)[3:].all()


def test_lr_schedule_warms_up_then_decays_to_min_lr():
    recipe = RECIPES["shakespeare-char"]
    assert lr_at(0, recipe) == pytest.approx(recipe.lr / recipe.warmup_steps)
    assert lr_at(recipe.warmup_steps, recipe) == pytest.approx(recipe.lr)
    assert lr_at(recipe.steps, recipe) == pytest.approx(recipe.min_lr)
    lrs = [lr_at(s, recipe) for s in range(recipe.warmup_steps, recipe.steps)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:], strict=False))


def test_induction_figures_on_a_hand_built_previous_token_pattern():
    """Scores read the pattern where the docstring says: a model whose every head attends to
    the previous token scores 1 as a previous-token head and 0 as an induction head."""
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=16, n_heads=2, n_ctx=64, d_vocab=20, attn_only=True, seed=0
    )
    model = HookedTransformer(cfg)

    def attend_to_previous(scores, hook):
        query = torch.arange(scores.shape[-2])[:, None]
        key = torch.arange(scores.shape[-1])[None]
        wanted = (key == query - 1) | ((query == 0) & (key == 0))
        return torch.where(wanted, 0.0, float("-inf")).expand_as(scores)

    model.add_hook("blocks.0.attn.hook_attn_scores", attend_to_previous)
    figures = induction_figures(model, half_length=10, batch_size=4)
    model.reset_hooks()
    assert figures["previous_token_scores"] == [[1.0, 1.0]]
    assert figures["induction_scores"] == [[0.0, 0.0]]


def test_cli_trains_saves_and_records_the_command(tmp_path, capsys):
    text_file = tmp_path / "corpus.txt"
    text_file.write_text(SHORT_TEXT, encoding="utf-8")
    argv = ["shakespeare-char", "--text", str(text_file), "--steps", "2", "--seed", "5"]
    main([*argv, "--out", str(tmp_path / "model")])
    model = load_native(tmp_path / "model")
    assert model.cfg.extra["seed"] == 5 and model.cfg.extra["steps"] == 2
    assert model.cfg.extra["command"].startswith("python -m interp.train shakespeare-char")
    assert "val_loss" in capsys.readouterr().out
    assert isinstance(model.tokenizer, CharTokenizer)


def test_bad_recipe_and_text_for_token_recipe_are_refused():
    with pytest.raises(ValueError, match="shakespeare-char"):
        train("shakespeare", steps=1, progress=False)
    with pytest.raises(ValueError, match="drop --text"):
        train("attn-only-2l", text="abc", steps=1, progress=False)


def test_weight_decay_reaches_grouped_query_attention_matrices():
    cfg = HookedTransformerConfig(
        n_layers=1,
        d_model=32,
        n_heads=4,
        n_key_value_heads=2,
        d_vocab=50,
        n_ctx=16,
        normalization_type="RMS",
        positional_embedding_type="rotary",
        gated_mlp=True,
        act_fn="silu",
    )
    model = HookedTransformer(cfg)
    decayed, plain = make_optimizer(model, RECIPES["shakespeare-char"]).param_groups
    decayed_ids = {id(p) for p in decayed["params"]}
    attn = model.blocks[0].attn
    assert {
        id(attn._W_K),
        id(attn._W_V),
        id(attn.W_Q),
        id(model.blocks[0].mlp.W_gate),
    } <= decayed_ids
    assert id(model.blocks[0].ln1.w) in {id(p) for p in plain["params"]}
