"""Train the models shipped in ``interp/models`` (or the same recipes on your own text).

One recipe per shipped model; the same seed gives bit-identical weights on a CPU with the
recipe's thread count. Run it as a module:

    python -m interp.train shakespeare-char --out my-shakespeare      # the shipped checkpoint
    python -m interp.train shakespeare-char --text my_corpus.txt --steps 500 --out my-model
    python -m interp.train attn-only-2l --seed 1 --out my-attn-only

Text models are character-level: the alphabet is the text's set of characters, the first
90% trains and the last 10% is held out (nanoGPT's split). The validation loss is the mean
next-character loss over the whole held-out text, read in windows of ``n_ctx`` characters.
"""

from __future__ import annotations

import argparse
import gzip
import math
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.config import HookedTransformerConfig
from interp.model import HookedTransformer
from interp.sampling import sample_next_token
from interp.tokenizers import CharTokenizer, SymbolTokenizer

VAL_FRACTION = 0.1


@dataclass(frozen=True)
class Recipe:
    """Everything that fixes a training run besides the seed and the data.

    ``config`` holds HookedTransformerConfig arguments; a text recipe leaves out ``d_vocab``
    (it is the text's alphabet size).
    """

    config: dict[str, Any]
    data: str  # "text" (characters of a text) or "copied-segment" (see copied_segment_batch)
    steps: int
    batch_size: int
    lr: float
    min_lr: float
    warmup_steps: int
    weight_decay: float
    betas: tuple[float, float] = (0.9, 0.99)
    grad_clip: float | None = 1.0
    seed: int = 0
    threads: int = 1
    data_options: dict[str, Any] = field(default_factory=dict)


RECIPES: dict[str, Recipe] = {
    "shakespeare-char": Recipe(
        config=dict(
            n_layers=4,
            d_model=128,
            n_heads=4,
            n_ctx=128,
            act_fn="gelu",
            default_prepend_bos=False,
        ),
        data="text",
        steps=2000,
        batch_size=16,
        lr=2e-3,
        min_lr=2e-4,
        warmup_steps=100,
        weight_decay=0.1,
        seed=1337,
    ),
    # Found by a search over data, width, heads, init scale and learning rate: with one head
    # per layer, no layer norm, a large init and a loss on copied tokens only, layer 0
    # becomes a previous-token head and layer 1 an induction head.
    "attn-only-2l": Recipe(
        config=dict(
            n_layers=2,
            d_model=128,
            n_heads=1,
            d_head=64,
            n_ctx=64,
            d_vocab=512,
            attn_only=True,
            normalization_type=None,
            init_range=0.1,
        ),
        data="copied-segment",
        data_options=dict(min_segment=2, max_segment=24),
        steps=1500,
        batch_size=32,
        lr=1e-2,
        min_lr=0.0,
        warmup_steps=200,
        weight_decay=0.0,
        betas=(0.9, 0.98),
        grad_clip=None,
        seed=0,
    ),
}


# ----------------------------------------------------------------------------- text data
def default_text() -> str:
    """The tiny-shakespeare text (public domain, 1.1 MB) shipped with the package.

    Example:
        >>> default_text()[:14]
        'First Citizen:'
    """
    data = resources.files("interp.models").joinpath("data/tinyshakespeare.txt.gz")
    return gzip.decompress(data.read_bytes()).decode("utf-8")


def split_text(text: str, val_fraction: float = VAL_FRACTION) -> tuple[str, str]:
    """The first ``1 - val_fraction`` of the text for training, the rest held out.

    Example:
        >>> split_text("abcdefghij")
        ('abcdefghi', 'j')
    """
    n_train = int(len(text) * (1 - val_fraction))
    return text[:n_train], text[n_train:]


def text_batch(
    tokens: Int[Tensor, " n_tokens"], batch_size: int, n_ctx: int, generator: torch.Generator
) -> Int[Tensor, "batch n_ctx"]:
    """``batch_size`` windows of ``n_ctx`` tokens at random offsets of ``tokens``.

    Example:
        >>> text_batch(torch.arange(100), 2, 5, torch.Generator().manual_seed(0))
        tensor([[44, 45, 46, 47, 48],
                [15, 16, 17, 18, 19]])
    """
    starts = torch.randint(len(tokens) - n_ctx + 1, (batch_size,), generator=generator)
    return torch.stack([tokens[start : start + n_ctx] for start in starts.tolist()])


@torch.no_grad()
def text_loss(model: HookedTransformer, text: str, batch_size: int = 64) -> float:
    """Mean next-token loss over all of ``text``: windows of ``n_ctx`` tokens that overlap by
    one, so every token after the first is predicted exactly once.

    Example:
        >>> text_loss(interp.load_model("shakespeare-char"), split_text(default_text())[1])
        1.6...
    """
    tokens = torch.tensor(model.tokenizer.encode(text))
    stride = model.cfg.n_ctx - 1
    windows = [
        tokens[start : start + model.cfg.n_ctx] for start in range(0, len(tokens) - 1, stride)
    ]
    total, count = 0.0, 0
    for first in range(0, len(windows), batch_size):
        chunk = windows[first : first + batch_size]
        full = [w for w in chunk if len(w) == model.cfg.n_ctx]
        partial = [w for w in chunk if len(w) != model.cfg.n_ctx]
        for group in ([torch.stack(full)] if full else []) + [w[None] for w in partial]:
            losses = model(group.to(model.device), return_type="loss", loss_per_token=True)
            total += losses.double().sum().item()
            count += losses.numel()
    return total / count


@torch.no_grad()
def sample_text(
    model: HookedTransformer,
    prompt: str,
    n_tokens: int,
    seed: int = 0,
    temperature: float = 0.8,
    top_k: int | None = None,
) -> str:
    """``prompt`` continued by ``n_tokens`` sampled tokens; unlike ``model.generate`` the text
    may outgrow ``n_ctx``, since each step sees only the last ``n_ctx`` tokens (nanoGPT's
    ``sample.py``).

    Example:
        >>> print(sample_text(interp.load_model("shakespeare-char"), "ROMEO:\n", 200, seed=0))
    """
    generator = torch.Generator(model.device).manual_seed(seed)
    tokens = model.to_tokens(prompt)  # [1, pos]
    for _ in range(n_tokens):
        logits = model(tokens[:, -model.cfg.n_ctx :])[:, -1]  # [1, d_vocab]
        next_token = sample_next_token(logits, True, temperature, top_k, None, generator)
        tokens = torch.cat([tokens, next_token[:, None]], dim=1)
    return model.to_string(tokens[0])


# -------------------------------------------------------------------- repeated-token data
def copied_segment_batch(
    batch_size: int,
    length: int,
    d_vocab: int,
    generator: torch.Generator,
    min_segment: int,
    max_segment: int,
) -> tuple[Int[Tensor, "batch length"], Float[Tensor, "batch length-1"]]:
    """Random tokens in which one segment of ``min_segment`` to ``max_segment`` tokens is
    copied once, at a random distance of 1 or more tokens after its start; and the loss
    mask [batch, length - 1] that keeps only the predictions made inside the copy (the
    current token and its target both copied), the only predictable ones. Token
    ``d_vocab - 1`` is a BOS at position 0 and appears nowhere else.

    The source ends at a uniformly random place in half the rows and, in the other half,
    ``r`` tokens before the last place it can end, with ``P(r)`` about ``1 / (r + 1)``. A
    copy closer than its length overlaps its source and repeats it periodically (distance 1
    is a run of one token). So the positions after source tokens, where an induction head
    reads and a previous-token head must work, cover the whole context, the last position
    included, about as often as the loss positions there.

    Example:
        >>> tokens, mask = copied_segment_batch(1, 12, 10, torch.Generator().manual_seed(0), 3, 3)
        >>> tokens, mask
        (tensor([[9, 0, 2, 6, 7, 2, 6, 7, 1, 0, 8, 2]]),
         tensor([[0., 0., 0., 0., 0., 1., 1., 0., 0., 0., 0.]]))
    """
    bos = d_vocab - 1
    tokens = torch.randint(0, bos, (batch_size, length), generator=generator)
    tokens[:, 0] = bos
    segment = torch.randint(min_segment, max_segment + 1, (batch_size, 1), generator=generator)
    uniform = torch.rand(batch_size, 3, generator=generator)
    # The source ends at segment + floor(place * span), in segment .. length - 2: its start
    # is 1 or later and its copy fits. place is uniform, or 1 - ((span + 1)^u - 1) / span.
    span = length - 1 - segment
    place = uniform[:, :1]
    near_end = 1 - ((span.double() + 1) ** place.double() - 1) / span.double()
    near_end = near_end.float().clamp(0, 0.999999)
    place = torch.where(uniform[:, 2:] < 0.5, near_end, place)
    source_end = segment + (place * span).long()
    # From the source's end to the copy's: 1 .. length - 1 - source_end.
    distance = 1 + (uniform[:, 1:2] * (length - 1 - source_end)).long()
    source_start = source_end - segment + 1
    copy_start = source_start + distance
    position = torch.arange(length)[None]
    in_copy = (position >= copy_start) & (position < copy_start + segment)  # [batch, length]
    # Token i of the copy is token i of the source, or of the copy itself when they overlap.
    source = torch.where(in_copy, source_start + (position - source_start) % distance, position)
    loss_mask = (in_copy[:, 1:] & in_copy[:, :-1]).float()
    return tokens.gather(1, source), loss_mask


def repeated_sequence(
    batch_size: int, half_length: int, d_vocab: int, seed: int
) -> Int[Tensor, "batch 1+2*half_length"]:
    """BOS, then ``half_length`` random tokens twice: the standard induction probe.

    Example:
        >>> repeated_sequence(1, 3, 10, seed=0).shape
        torch.Size([1, 7])
    """
    generator = torch.Generator().manual_seed(seed)
    half = torch.randint(0, d_vocab - 1, (batch_size, half_length), generator=generator)
    bos = torch.full((batch_size, 1), d_vocab - 1)
    return torch.cat([bos, half, half], dim=1)


@torch.no_grad()
def induction_figures(
    model: HookedTransformer, half_length: int = 25, batch_size: int = 200, seed: int = 1234
) -> dict[str, Any]:
    """Per-head induction and previous-token scores [n_layers][n_heads] and the loss on the
    second copy, on BOS + ``half_length`` random tokens repeated once.

    The induction score is the mean attention from a second-copy token to the token after
    its first occurrence; the previous-token score, the mean attention to the token just
    before (over every position after the first).

    Example:
        >>> induction_figures(interp.load_model("attn-only-2l"))["induction_scores"][1]
        [0.9..., ...]
    """
    tokens = repeated_sequence(batch_size, half_length, model.cfg.d_vocab, seed)
    logits, cache = model.run_with_cache(tokens, names_filter=lambda name: "pattern" in name)
    second_copy = torch.arange(1 + half_length, 1 + 2 * half_length)  # query positions
    after_first = second_copy - half_length + 1
    query = torch.arange(1, tokens.shape[1])
    induction, previous = [], []
    for layer in range(model.cfg.n_layers):
        pattern = cache["pattern", layer]  # [batch, head, query_pos, key_pos]
        induction.append(pattern[:, :, second_copy, after_first].mean((0, 2)).tolist())
        previous.append(pattern[:, :, query, query - 1].mean((0, 2)).tolist())
    log_probs = logits[:, :-1].log_softmax(-1).gather(-1, tokens[:, 1:, None])[..., 0]
    losses = -log_probs  # [batch, pos - 1]; entry i predicts token i + 1
    second_copy_loss = losses[:, 1 + half_length : 2 * half_length].mean().item()
    return {
        "induction_scores": induction,
        "previous_token_scores": previous,
        "second_copy_loss": second_copy_loss,
    }


# The per-position probes of the model card: the issue-13 probe (BOS + 31 tokens twice, 63
# tokens) and one that fills a 64-token context (BOS + 32 tokens, then the first 31 again).
POSITION_PROBES = ((31, None), (32, 64))  # (half_length, length)


@torch.no_grad()
def position_scores(
    model: HookedTransformer,
    half_length: int,
    length: int | None = None,
    batch_size: int = 500,
    seed: int = 1234,
) -> tuple[Float[Tensor, "n_layers n_heads n_query"], Float[Tensor, "n_layers n_heads n_second"]]:
    """Per-position previous-token and induction scores of every head on BOS +
    ``half_length`` random tokens twice, cut to ``length`` tokens (default: all of them).

    ``previous[l, h, i]`` is the mean attention from position ``i + 1`` to position ``i``;
    ``induction[l, h, i]`` the mean attention from second-copy position ``1 + half_length + i``
    to the token after its first occurrence. A head that works only on part of the context
    has a high mean score and a low minimum over positions.

    Example:
        >>> previous, induction = position_scores(interp.load_model("attn-only-2l"), 32, 64)
        >>> previous[0, 0].min(), induction[1, 0].min()  # L0H0 at positions 1-63, L1H0 at 33-63
    """
    tokens = repeated_sequence(batch_size, half_length, model.cfg.d_vocab, seed)[:, :length]
    _, cache = model.run_with_cache(tokens, names_filter=lambda name: "pattern" in name)
    query = torch.arange(1, tokens.shape[1])
    second_copy = torch.arange(1 + half_length, tokens.shape[1])
    patterns = torch.stack([cache["pattern", layer] for layer in range(model.cfg.n_layers)])
    # patterns: [n_layers, batch, head, query_pos, key_pos]
    previous = patterns[..., query, query - 1].mean(1)
    induction = patterns[..., second_copy, second_copy - half_length + 1].mean(1)
    return previous, induction


def position_minima(model: HookedTransformer) -> list[dict[str, Any]]:
    """For each of ``POSITION_PROBES``, each head's minimum over positions of its previous-token
    and induction scores [n_layers][n_heads] (see ``position_scores``).

    Example:
        >>> position_minima(interp.load_model("attn-only-2l"))[1]["previous_token_scores"][0]
        [0.9...]
    """
    minima = []
    for half_length, length in POSITION_PROBES:
        previous, induction = position_scores(model, half_length, length)
        minima.append(
            {
                "half_length": half_length,
                "length": 1 + 2 * half_length if length is None else length,
                "previous_token_scores": previous.amin(-1).tolist(),
                "induction_scores": induction.amin(-1).tolist(),
            }
        )
    return minima


# -------------------------------------------------------------------------------- training
def lr_at(step: int, recipe: Recipe) -> float:
    """Linear warmup, then cosine decay from ``lr`` to ``min_lr`` at the last step.

    Example:
        >>> lr_at(0, RECIPES["shakespeare-char"])
        2e-05
    """
    if step < recipe.warmup_steps:
        return recipe.lr * (step + 1) / recipe.warmup_steps
    progress = (step - recipe.warmup_steps) / max(1, recipe.steps - recipe.warmup_steps)
    return recipe.min_lr + 0.5 * (recipe.lr - recipe.min_lr) * (1 + math.cos(math.pi * progress))


def make_optimizer(model: HookedTransformer, recipe: Recipe) -> torch.optim.AdamW:
    """AdamW with weight decay on the weight matrices (``W_*``, and grouped-query attention's
    stored ``_W_K``/``_W_V``) only, as in nanoGPT."""

    def is_matrix(name: str) -> bool:
        return name.split(".")[-1].lstrip("_").startswith("W_")

    matrices = [p for name, p in model.named_parameters() if is_matrix(name)]
    others = [p for name, p in model.named_parameters() if not is_matrix(name)]
    groups = [
        {"params": matrices, "weight_decay": recipe.weight_decay},
        {"params": others, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=recipe.lr, betas=recipe.betas, foreach=False)


def fit(
    model: HookedTransformer,
    recipe: Recipe,
    next_batch: Callable[
        [], tuple[Int[Tensor, "batch n_ctx+1"], Float[Tensor, "batch n_ctx"] | None]
    ],
    progress: bool = True,
) -> list[float]:
    """Train ``model`` in place for ``recipe.steps`` steps; the losses.

    ``next_batch()`` gives windows of ``n_ctx + 1`` tokens and an optional 0/1 mask over
    the ``n_ctx`` predictions: the model reads the first ``n_ctx`` tokens and predicts the
    last ``n_ctx`` (nanoGPT's x and y), so every position, the last included, is trained.
    (``model(window, return_type="loss")`` on ``n_ctx`` tokens would never train the last
    position: its embedding would stay random, and text sampled past ``n_ctx - 1`` tokens
    would turn to gibberish.)

    Example:
        >>> fit(model, recipe, lambda: (text_batch(tokens, 32, model.cfg.n_ctx + 1, gen), None))
    """
    optimizer = make_optimizer(model, recipe)
    losses = []
    model.train()
    bar = tqdm(range(recipe.steps), disable=not progress, desc="training", unit="step")
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, recipe)
        window, loss_mask = next_batch()  # [batch, n_ctx + 1], [batch, n_ctx] or None
        logits = model(window[:, :-1])  # [batch, n_ctx, d_vocab]
        if loss_mask is None:
            loss = F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten())
        else:
            token_losses = F.cross_entropy(logits.transpose(1, 2), window[:, 1:], reduction="none")
            loss = (token_losses * loss_mask).sum() / loss_mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if recipe.grad_clip is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), recipe.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    model.eval()
    return losses


def train(
    name: str,
    text: str | None = None,
    seed: int | None = None,
    steps: int | None = None,
    progress: bool = True,
    **recipe_overrides: Any,
) -> HookedTransformer:
    """Train the recipe ``name`` from ``seed`` (default: the recipe's) and return the model,
    with the run's figures in ``model.cfg.extra``.

    ``text`` replaces tiny-shakespeare for text recipes. Other ``Recipe`` fields can be
    overridden by keyword (e.g. ``batch_size=8``).

    Example:
        >>> model = train("shakespeare-char", text=open("my_corpus.txt").read(), steps=500)
        >>> model.cfg.extra["val_loss"]  # on the last 10% of the text
    """
    if name not in RECIPES:
        raise ValueError(f"No recipe named {name!r}; choose one of {sorted(RECIPES)}.")
    recipe = replace(RECIPES[name], **recipe_overrides)
    if seed is not None:
        recipe = replace(recipe, seed=seed)
    if steps is not None:
        recipe = replace(recipe, steps=steps)
    if text is not None and recipe.data != "text":
        raise ValueError(f"{name!r} trains on generated tokens, not text; drop --text.")
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed + 1)
    started = time.perf_counter()
    if recipe.data == "text":
        model, figures = _train_on_text(name, recipe, text, generator, progress)
    else:
        model, figures = _train_on_copied_segments(name, recipe, generator, progress)
    model.cfg.extra.update(
        figures,
        seed=recipe.seed,
        steps=recipe.steps,
        threads=recipe.threads,
        torch_version=torch.__version__,
        train_seconds=round(time.perf_counter() - started, 1),
    )
    return model


def _train_on_text(
    name: str, recipe: Recipe, text: str | None, generator: torch.Generator, progress: bool
) -> tuple[HookedTransformer, dict[str, Any]]:
    text = default_text() if text is None else text
    tokenizer = CharTokenizer(sorted(set(text)))
    train_text, val_text = split_text(text)
    train_tokens = torch.tensor(tokenizer.encode(train_text))
    cfg = HookedTransformerConfig(
        **recipe.config, d_vocab=tokenizer.vocab_size, seed=recipe.seed, model_name=name
    )
    model = HookedTransformer(cfg, tokenizer=tokenizer)
    losses = fit(
        model,
        recipe,
        lambda: (text_batch(train_tokens, recipe.batch_size, cfg.n_ctx + 1, generator), None),
        progress,
    )
    figures = {
        "final_train_loss": losses[-1],
        "val_loss": text_loss(model, val_text),
        "val_fraction": VAL_FRACTION,
    }
    return model, figures


def _train_on_copied_segments(
    name: str, recipe: Recipe, generator: torch.Generator, progress: bool
) -> tuple[HookedTransformer, dict[str, Any]]:
    cfg = HookedTransformerConfig(**recipe.config, seed=recipe.seed, model_name=name)
    # Symbols 0 .. d_vocab - 2 are the random tokens; d_vocab - 1 is the BOS.
    model = HookedTransformer(cfg, tokenizer=SymbolTokenizer(cfg.d_vocab, cfg.d_vocab - 1))
    options = recipe.data_options
    losses = fit(
        model,
        recipe,
        lambda: copied_segment_batch(
            recipe.batch_size, cfg.n_ctx + 1, cfg.d_vocab, generator, **options
        ),
        progress,
    )
    return model, {
        "final_train_loss": losses[-1],
        **induction_figures(model),
        "position_minima": position_minima(model),
    }


# ------------------------------------------------------------------------------------- CLI
def main(argv: Sequence[str] | None = None) -> None:
    """``python -m interp.train <model> [--text FILE] [--seed N] [--steps N] [--out DIR]``."""
    parser = argparse.ArgumentParser(
        prog="python -m interp.train", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("model", choices=sorted(RECIPES), help="which recipe to train")
    parser.add_argument("--text", type=Path, help="train on this UTF-8 text file instead")
    parser.add_argument("--seed", type=int, help="random seed (default: the recipe's)")
    parser.add_argument("--steps", type=int, help="training steps (default: the recipe's)")
    parser.add_argument("--out", type=Path, help="save the model here (native format)")
    args = parser.parse_args(argv)
    text = args.text.read_text(encoding="utf-8") if args.text is not None else None
    model = train(args.model, text=text, seed=args.seed, steps=args.steps)
    model.cfg.extra["command"] = shlex.join(
        ["python", "-m", "interp.train", *(argv or sys.argv[1:])]
    )
    for key, value in model.cfg.extra.items():
        print(f"{key}: {value}")
    if args.out is not None:
        model.save(args.out)
        print(f"saved to {args.out}")


if __name__ == "__main__":
    main()
