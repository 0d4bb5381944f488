"""Train the shipped SAE: a TopK sparse autoencoder on one hook of a shipped model.

The recipe is OpenAI's TopK SAE (Gao et al. 2024): ``k`` largest pre-activations kept,
normalised MSE, unit-norm decoder rows, ``b_dec`` started at the data mean, and the AuxK
loss that lets dead latents model the residual error. Activations are streamed from the
model on random windows of the training text (tiny-shakespeare's first 90%); figures are
measured on the held-out last 10%. One thread and a fixed seed give the same weights on
each run with the same torch.

    python -m interp.sae.train --out interp/shipped/saes/shakespeare-char-resid-l1

Example:
    >>> recipe = SAERecipe(steps=50)          # the shipped SAE's recipe, shorter
    >>> recipe.expansion * 128, recipe.k      # d_sae on shakespeare-char's d_model, TopK's k
    (1024, 16)
    >>> sae, figures = train_sae(recipe)  # a minute or more on a CPU  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

import interp
from interp.model import HookedTransformer
from interp.sae.sae import SAE, SAEConfig
from interp.sae.splice import HookedSAETransformer
from interp.training.text import default_text, split_text, text_batch, text_loss

QUICK_EVAL_CHARS = 20_000  # the card's second set of figures (the test recomputes these)


@dataclass(frozen=True)
class SAERecipe:
    """Everything that fixes a training run of the shipped SAE."""

    model: str = "shakespeare-char"
    hook_name: str = "blocks.1.hook_resid_post"
    expansion: int = 8  # d_sae = expansion * d_model
    k: int = 16
    steps: int = 1500
    batch_windows: int = 16  # windows of n_ctx tokens a step: 2,048 activations
    lr: float = 8e-4  # Gao et al.'s 2e-4 / sqrt(d_sae / 2**14)
    aux_k: int = 64  # AuxK: dead latents that model the residual error
    aux_coeff: float = 1 / 32
    dead_after_tokens: int = 100_000  # a latent silent this long counts as dead
    seed: int = 0
    threads: int = 1


def hook_activations(
    model: HookedTransformer, tokens: Int[Tensor, "batch pos"], hook_name: str
) -> Float[Tensor, "batch_pos d_in"]:
    """The activations at ``hook_name`` on ``tokens``, one row a token (forward stops there)."""
    _, cache = model.run_with_cache(tokens, names_filter=[hook_name], return_type=None)
    return cache[hook_name].flatten(0, -2)


def text_windows(tokens: Int[Tensor, " n"], n_ctx: int) -> Int[Tensor, "n_windows n_ctx"]:
    """Non-overlapping windows of ``n_ctx`` tokens (a last partial window dropped).

    Example:
        >>> text_windows(torch.arange(10), 4)
        tensor([[0, 1, 2, 3],
                [4, 5, 6, 7]])
    """
    n_windows = len(tokens) // n_ctx
    return tokens[: n_windows * n_ctx].view(n_windows, n_ctx)


def _topk_step(
    sae: SAE,
    x: Float[Tensor, "n d_in"],
    since_fired: Tensor,
    recipe: SAERecipe,
    target: Float[Tensor, "n d_out"] | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """The loss (normalised MSE + AuxK), the normalised MSE, and which latents fired.

    An SAE reconstructs ``x``; a transcoder predicts ``target`` (the activation at its
    output hook) from ``x``, through its skip connection too when it has one."""
    target = x if target is None else target
    sae_in = x - sae.b_dec if sae.cfg.apply_b_dec_to_input else x
    hidden_pre = sae_in @ sae.W_enc + sae.b_enc  # [n, d_sae]
    values, indices = hidden_pre.topk(recipe.k, dim=-1)
    acts = torch.zeros_like(hidden_pre).scatter(-1, indices, values.relu())
    recons = acts @ sae.W_dec + sae.b_dec + (sae.skip(x) if sae.cfg.has_skip else 0)
    variance = (target - target.mean(0)).pow(2).sum(-1).mean()
    mse = (recons - target).pow(2).sum(-1).mean() / variance
    fired = (acts > 0).any(0)
    loss = mse
    dead = since_fired >= recipe.dead_after_tokens
    n_dead = int(dead.sum())
    if n_dead:
        error = (target - recons).detach()
        masked = hidden_pre.masked_fill(~dead, float("-inf"))
        aux_values, aux_indices = masked.topk(min(recipe.aux_k, n_dead), dim=-1)
        aux_acts = torch.zeros_like(hidden_pre).scatter(-1, aux_indices, aux_values.relu())
        aux_error = aux_acts @ sae.W_dec
        aux_variance = (error - error.mean(0)).pow(2).sum(-1).mean()
        loss = loss + recipe.aux_coeff * (aux_error - error).pow(2).sum(-1).mean() / aux_variance
    return loss, mse.detach(), fired


def train_sae(recipe: SAERecipe = SAERecipe(), progress: bool = True) -> tuple[SAE, dict[str, Any]]:
    """Train the recipe's TopK SAE; returns it and its figures on the held-out text.

    Example:
        >>> sae, figures = train_sae(SAERecipe(steps=2))  # trains a minute  # doctest: +SKIP
    """
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    generator = torch.Generator().manual_seed(recipe.seed + 1)
    started = time.perf_counter()
    model = interp.load_model(recipe.model)
    model.requires_grad_(False)
    d_model, n_ctx = model.cfg.d_model, model.cfg.n_ctx
    train_text, _ = split_text(default_text())
    train_tokens = torch.tensor(model.tokenizer.encode(train_text))
    cfg = SAEConfig(
        d_in=d_model,
        d_sae=recipe.expansion * d_model,
        architecture="topk",
        k=recipe.k,
        hook_name=recipe.hook_name,
        model_name=recipe.model,
        extra={"context_size": n_ctx, "prepend_bos": False, "dataset_path": "tinyshakespeare"},
    )
    sae = SAE(cfg)
    with torch.no_grad():
        sae.W_dec.copy_(torch.randn(cfg.d_sae, d_model))
        sae.W_dec /= sae.W_dec.norm(dim=-1, keepdim=True)
        sae.W_enc.copy_(sae.W_dec.T)
        windows = text_batch(train_tokens, 64, n_ctx, generator)
        sae.b_dec.copy_(hook_activations(model, windows, cfg.hook_name).mean(0))
    optimizer = torch.optim.Adam(sae.parameters(), lr=recipe.lr, foreach=False)
    since_fired = torch.zeros(cfg.d_sae, dtype=torch.long)
    for step in range(recipe.steps):
        with torch.no_grad():
            windows = text_batch(train_tokens, recipe.batch_windows, n_ctx, generator)
            x = hook_activations(model, windows, cfg.hook_name)
        lr_scale = min(1.0, (recipe.steps - step) / (0.2 * recipe.steps))  # decay over last 20%
        for group in optimizer.param_groups:
            group["lr"] = recipe.lr * lr_scale
        loss, mse, fired = _topk_step(sae, x, since_fired, recipe)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            sae.W_dec /= sae.W_dec.norm(dim=-1, keepdim=True)
        since_fired = torch.where(fired, 0, since_fired + len(x))
        if progress and (step % 100 == 0 or step == recipe.steps - 1):
            dead = int((since_fired >= recipe.dead_after_tokens).sum())
            print(f"step {step:5d}  1 - EV {mse.item():.4f}  dead {dead}", flush=True)
    figures = sae_figures(model, sae)
    figures["train_seconds"] = round(time.perf_counter() - started, 1)
    figures["torch_version"] = torch.__version__
    return sae, figures


@torch.no_grad()
def sae_figures(
    model: HookedTransformer, sae: SAE, text: str | None = None, batch_windows: int = 64
) -> dict[str, float]:
    """The model card's figures for ``sae`` on ``text`` (default: the held-out 10% of
    tiny-shakespeare), in non-overlapping windows of ``n_ctx`` tokens:

    - ``explained_variance``: 1 - sum ||x - SAE(x)||^2 / sum ||x - mean x||^2 over tokens;
    - ``l0``: mean number of active features a token;
    - ``dead_fraction``: the share of features active on no token of the text;
    - ``ce_loss_clean`` / ``ce_loss_spliced`` (``text_loss``, every token predicted once)
      and ``ce_loss_added``, their difference.

    Example:
        >>> model = interp.load_model("shakespeare-char")
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> text = split_text(default_text())[1][:2000]   # the held-out text's start
        >>> figures = sae_figures(model, sae, text)
        >>> figures["explained_variance"], figures["l0"]   # to 2 decimals (doctest's NUMBER)
        (0.95, 16.0)
    """
    text = split_text(default_text())[1] if text is None else text
    windows = text_windows(torch.tensor(model.tokenizer.encode(text)), model.cfg.n_ctx)
    hook = sae.cfg.hook_name
    sums = {"error": 0.0, "square": 0.0, "l0": 0.0}
    total = torch.zeros(sae.cfg.d_in, dtype=torch.float64)
    fired = torch.zeros(sae.cfg.d_sae, dtype=torch.bool)
    n_tokens = 0
    for first in range(0, len(windows), batch_windows):
        x = hook_activations(model, windows[first : first + batch_windows], hook).double()
        acts = sae.encode(x.float())
        recons = sae.decode(acts).double()
        sums["error"] += float((x - recons).pow(2).sum())
        sums["square"] += float(x.pow(2).sum())
        total += x.sum(0)
        sums["l0"] += float((acts > 0).sum())
        fired |= (acts > 0).any(0)
        n_tokens += len(x)
    variance = sums["square"] - float(total.pow(2).sum()) / n_tokens
    clean = text_loss(model, text)
    spliced_model = HookedSAETransformer.from_model(model)
    with spliced_model.saes([sae]):
        spliced = text_loss(spliced_model, text)
    return {
        "explained_variance": 1 - sums["error"] / variance,
        "l0": sums["l0"] / n_tokens,
        "dead_fraction": 1 - float(fired.double().mean()),
        "ce_loss_clean": clean,
        "ce_loss_spliced": spliced,
        "ce_loss_added": spliced - clean,
        "eval_tokens": n_tokens,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m interp.sae.train", description="Train the shipped TopK SAE."
    )
    parser.add_argument("--out", required=True, type=Path, help="the SAELens folder to write")
    parser.add_argument("--steps", type=int, default=SAERecipe.steps)
    parser.add_argument("--k", type=int, default=SAERecipe.k)
    parser.add_argument("--expansion", type=int, default=SAERecipe.expansion)
    parser.add_argument("--hook", default=SAERecipe.hook_name)
    parser.add_argument("--seed", type=int, default=SAERecipe.seed)
    args = parser.parse_args(argv)
    recipe = SAERecipe(
        steps=args.steps, k=args.k, expansion=args.expansion, hook_name=args.hook, seed=args.seed
    )
    sae, figures = train_sae(recipe)
    sae.save(args.out)
    model = interp.load_model(recipe.model)
    quick = sae_figures(model, sae, split_text(default_text())[1][:QUICK_EVAL_CHARS])
    record = {"recipe": asdict(recipe), "figures": figures, "figures_quick": quick}
    (args.out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
