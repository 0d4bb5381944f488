"""Train the shipped transcoders: one skip transcoder a layer of ``shakespeare-char``, each
reading its MLP's input and predicting its MLP's output.

1. ``interp.harvest`` stores every layer's MLP input (``ln2.hook_normalized``: after ln2's
   weight and bias, what the MLP reads) and output (``hook_mlp_out``) on the first
   ``harvest_tokens`` characters of tiny-shakespeare's training 90%, in windows of
   ``n_ctx``.
2. Each layer trains with the SAE trainer's TopK step (``interp.sae.train._topk_step``:
   OpenAI's TopK recipe, normalised MSE against the MLP output, AuxK), the prediction
   ``TopK(x W_enc + b_enc) W_dec + b_dec + x W_skip^T``; input and target batches come from
   two ``ActivationStore`` s with one seed (the same shuffle, checked by their token ids).
3. The shipped form is JumpReLU (circuit-tracer reads it; BatchTopK's conversion, Bussmann
   et al. 2024): one threshold for all features, the value that keeps ``k`` features a
   token on average over harvested activations (or 0 if that is lower).

The set is written in circuit-tracer's format (``config.yaml`` + ``layer_{i}.safetensors``,
hooks ``mlp.hook_in`` / ``mlp.hook_out``) with ``training.json``; the figures are measured on
the held-out last 10%. One thread and a fixed seed give the same weights on each run with
the same torch.

    python -m interp.circuits.train_transcoders \\
        --out interp/shipped/transcoders/shakespeare-char-transcoders

Example:
    >>> TranscoderRecipe(steps=50).steps   # a layer's training steps
    50
    >>> recipe = TranscoderRecipe(steps=50)
    >>> transcoders, figures = train_transcoders(recipe)  # minutes  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

import interp
from interp.circuits.attribution import attribute
from interp.circuits.graph import compute_graph_scores
from interp.circuits.replacement_model import ReplacementModel
from interp.circuits.transcoders import TranscoderSet, load_transcoders
from interp.harvest import ActivationStore, harvest
from interp.model import HookedTransformer
from interp.sae.sae import SAE, SAEConfig
from interp.sae.train import SAERecipe, _topk_step, text_windows
from interp.training.text import default_text, split_text, text_loss

HARVEST_HOOKS = ("ln2.hook_normalized", "hook_mlp_out")  # the MLP's input and output
SHIPPED_HOOKS = ("mlp.hook_in", "mlp.hook_out")  # the same tensors, as circuit-tracer names them
SHIPPED_NAME = "shakespeare-char-transcoders"
QUICK_EVAL_CHARS = 20_000  # the card's second set of figures (the test recomputes these)


@dataclass(frozen=True)
class TranscoderRecipe:
    """Everything that fixes a training run of the shipped transcoders."""

    model: str = "shakespeare-char"
    expansion: int = 8  # d_transcoder = expansion * d_model
    k: int = 16
    steps: int = 800  # a layer
    batch_tokens: int = 1024
    harvest_tokens: int = 1 << 18  # 2,048 windows of 128 characters
    lr: float = 8e-4
    aux_k: int = 64
    aux_coeff: float = 1 / 32
    dead_after_tokens: int = 100_000
    n_score_prompts: int = 4  # held-out prompts for the replacement score
    score_prompt_chars: int = 64
    seed: int = 0
    threads: int = 1


def _paired_batches(
    folder: Path, layer: int, recipe: TranscoderRecipe
) -> Iterator[tuple[Tensor, Tensor]]:
    """(MLP input, MLP output) batches of layer ``layer``, shuffled, for ``recipe.steps``
    steps (as many epochs of the harvest as that takes)."""
    hook_in, hook_out = (f"blocks.{layer}.{hook}" for hook in HARVEST_HOOKS)
    kwargs = {"batch_size": recipe.batch_tokens, "seed": recipe.seed + layer, "with_tokens": True}
    inputs = ActivationStore(folder, hook_in, **kwargs)
    outputs = ActivationStore(folder, hook_out, **kwargs)
    step, epoch = 0, 0
    while True:
        inputs.set_epoch(epoch)
        outputs.set_epoch(epoch)
        for (x, x_ids), (y, y_ids) in zip(inputs, outputs, strict=True):
            if not torch.equal(x_ids, y_ids):
                raise RuntimeError("The input and output stores shuffled differently.")
            if len(x) < recipe.batch_tokens:  # an epoch's short last batch
                continue
            yield x, y
            step += 1
            if step == recipe.steps:
                return
        epoch += 1


def _new_transcoder(layer: int, d_model: int, recipe: TranscoderRecipe) -> SAE:
    """A TopK skip transcoder at its initialisation: unit-norm decoder rows, ``W_enc`` their
    transpose, ``W_skip`` zero."""
    cfg = SAEConfig(
        d_in=d_model,
        d_sae=recipe.expansion * d_model,
        d_out=d_model,
        architecture="topk_skip_transcoder",
        k=recipe.k,
        hook_name=f"blocks.{layer}.{HARVEST_HOOKS[0]}",
        hook_name_out=f"blocks.{layer}.{HARVEST_HOOKS[1]}",
        apply_b_dec_to_input=False,
        model_name=recipe.model,
    )
    transcoder = SAE(cfg)
    with torch.no_grad():
        transcoder.W_dec.copy_(torch.randn(cfg.d_sae, d_model))
        transcoder.W_dec /= transcoder.W_dec.norm(dim=-1, keepdim=True)
        transcoder.W_enc.copy_(transcoder.W_dec.T)
        transcoder.W_skip.zero_()
    return transcoder


def _train_layer(folder: Path, layer: int, d_model: int, recipe: TranscoderRecipe) -> SAE:
    transcoder = _new_transcoder(layer, d_model, recipe)
    step_recipe = SAERecipe(
        k=recipe.k,
        aux_k=recipe.aux_k,
        aux_coeff=recipe.aux_coeff,
        dead_after_tokens=recipe.dead_after_tokens,
    )
    optimizer = torch.optim.Adam(transcoder.parameters(), lr=recipe.lr, foreach=False)
    since_fired = torch.zeros(transcoder.cfg.d_sae, dtype=torch.long)
    for step, (x, y) in enumerate(_paired_batches(folder, layer, recipe)):
        if step == 0:
            with torch.no_grad():
                transcoder.b_dec.copy_(y.mean(0))
        lr_scale = min(1.0, (recipe.steps - step) / (0.2 * recipe.steps))  # decay last 20%
        for group in optimizer.param_groups:
            group["lr"] = recipe.lr * lr_scale
        loss, mse, fired = _topk_step(transcoder, x, since_fired, step_recipe, target=y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            transcoder.W_dec /= transcoder.W_dec.norm(dim=-1, keepdim=True)
        since_fired = torch.where(fired, 0, since_fired + len(x))
        if step % 250 == 0 or step == recipe.steps - 1:
            dead = int((since_fired >= recipe.dead_after_tokens).sum())
            print(f"layer {layer} step {step:5d}  1 - EV {mse.item():.4f}  dead {dead}", flush=True)
    return transcoder


@torch.no_grad()
def _global_threshold(
    transcoder: SAE, folder: Path, layer: int, k: int, n_tokens: int = 1 << 14
) -> float:
    """The pre-activation above which ``k`` features a token are kept on average, over
    ``n_tokens`` harvested inputs of ``layer`` (the first, in shard order); never below 0
    (a TopK layer whose k-th value is often negative becomes ReLU: interp's JumpReLU is
    ReLU there anyway, and circuit-tracer's would pass negative activations)."""
    store = ActivationStore(folder, f"blocks.{layer}.{HARVEST_HOOKS[0]}", batch_size=n_tokens)
    store.shuffle_buffer = 0
    x = next(iter(store))
    hidden_pre = x @ transcoder.W_enc + transcoder.b_enc  # [n_tokens, d_transcoder]
    return max(0.0, float(hidden_pre.flatten().topk(len(x) * k).values[-1]))


def _jumprelu(transcoder: SAE, threshold: float) -> SAE:
    """The shipped form: ``transcoder``'s weights, JumpReLU with one threshold."""
    # A new architecture is a new config class: rebuilt from the dict (k is not one of its fields)
    cfg = SAEConfig.from_dict(
        {**transcoder.cfg.to_dict(), "architecture": "jumprelu_skip_transcoder"}
    )
    shipped = SAE(cfg)
    state = {**transcoder.state_dict(), "threshold": torch.full((cfg.d_sae,), threshold)}
    shipped.load_state_dict(state)
    return shipped


def train_transcoders(
    recipe: TranscoderRecipe = TranscoderRecipe(),
) -> tuple[TranscoderSet, dict[str, Any]]:
    """Harvest, train each layer, convert to JumpReLU; returns the set and its figures.

    Example:
        >>> recipe = TranscoderRecipe(steps=50)
        >>> transcoders, figures = train_transcoders(recipe)  # minutes on CPU  # doctest: +SKIP
    """
    torch.set_num_threads(recipe.threads)
    torch.manual_seed(recipe.seed)
    started = time.perf_counter()
    model = interp.load_model(recipe.model)
    model.requires_grad_(False)
    n_layers, d_model = model.cfg.n_layers, model.cfg.d_model
    train_text, _ = split_text(default_text())
    hooks = [f"blocks.{layer}.{hook}" for layer in range(n_layers) for hook in HARVEST_HOOKS]
    shipped, thresholds = [], []
    with tempfile.TemporaryDirectory() as scratch:
        text_file = Path(scratch) / "train.txt"
        text_file.write_text(train_text, encoding="utf-8")
        acts = Path(scratch) / "acts"
        harvest(
            model,
            text_file,
            hooks,
            acts,
            max_tokens=recipe.harvest_tokens,
            batch_size=32,
            shard_tokens=1 << 15,
            progress=False,
        )
        for layer in range(n_layers):
            transcoder = _train_layer(acts, layer, d_model, recipe)
            thresholds.append(_global_threshold(transcoder, acts, layer, recipe.k))
            shipped.append(_jumprelu(transcoder, thresholds[-1]))
    transcoders = TranscoderSet(shipped, *SHIPPED_HOOKS, scan=f"{recipe.model}-transcoders")
    figures = transcoder_figures(model, transcoders, recipe)
    figures["thresholds"] = thresholds
    figures["train_seconds"] = round(time.perf_counter() - started, 1)
    figures["torch_version"] = torch.__version__
    return transcoders, figures


@torch.no_grad()
def _layer_sums(
    transcoders: TranscoderSet, x: Float[Tensor, "n d"], y: Float[Tensor, "n d"], layer: int
) -> dict[str, Any]:
    acts = transcoders.encode(layer, x)
    prediction = acts @ transcoders[layer].W_dec + transcoders[layer].b_dec
    skip = transcoders.skip(layer, x)
    prediction = (prediction + skip).double()
    y = y.double()
    skip_residual = y - skip.double()
    return {
        "error": float((y - prediction).pow(2).sum()),
        "skip_square": float(skip_residual.pow(2).sum()),
        "skip_total": skip_residual.sum(0),
        "square": float(y.pow(2).sum()),
        "total": y.sum(0),
        "l0": float((acts > 0).sum()),
        "fired": (acts > 0).any(0),
    }


def transcoder_figures(
    model: HookedTransformer,
    transcoders: TranscoderSet,
    recipe: TranscoderRecipe = TranscoderRecipe(),
    text: str | None = None,
    batch_windows: int = 64,
) -> dict[str, Any]:
    """The card's figures on ``text`` (default: tiny-shakespeare's held-out last 10%) in
    windows of ``n_ctx``:

    - per layer, ``explained_variance`` of the MLP output, 1 - sum ||y - T(x)||^2 /
      sum ||y - mean y||^2 (``T`` with its skip path); ``skip_explained_variance``, the
      same for the skip path alone (plus the best constant); ``l0``,
      mean active features a token; ``dead_fraction``;
    - ``ce_loss_clean`` / ``ce_loss_replaced``: next-character loss with every MLP
      replaced by its transcoder (no error term);
    - ``replacement_score`` / ``completeness_score`` (``compute_graph_scores``) of the
      attribution graphs of ``n_score_prompts`` held-out prompts, and their means.
    """
    text = split_text(default_text())[1] if text is None else text
    windows = text_windows(torch.tensor(model.tokenizer.encode(text)), model.cfg.n_ctx)
    n_layers = model.cfg.n_layers
    names = [f"blocks.{layer}.{hook}" for layer in range(n_layers) for hook in HARVEST_HOOKS]
    per_layer: list[dict[str, Any]] = [{} for _ in range(n_layers)]
    n_tokens = 0
    for first in range(0, len(windows), batch_windows):
        with torch.no_grad():
            _, cache = model.run_with_cache(
                windows[first : first + batch_windows], names_filter=names, return_type=None
            )
        for layer in range(n_layers):
            x, y = (cache[f"blocks.{layer}.{hook}"].flatten(0, 1) for hook in HARVEST_HOOKS)
            for key, value in _layer_sums(transcoders, x, y, layer).items():
                sums = per_layer[layer]
                if key == "fired":
                    sums[key] = value | sums.get(key, False)
                else:
                    sums[key] = sums.get(key, 0) + value
        n_tokens += windows[first : first + batch_windows].numel()
    layers = []
    for sums in per_layer:
        variance = sums["square"] - float(sums["total"].pow(2).sum()) / n_tokens
        skip_variance = sums["skip_square"] - float(sums["skip_total"].pow(2).sum()) / n_tokens
        layers.append(
            {
                "explained_variance": 1 - sums["error"] / variance,
                "skip_explained_variance": 1 - skip_variance / variance,
                "l0": sums["l0"] / n_tokens,
                "dead_fraction": 1 - float(sums["fired"].double().mean()),
            }
        )
    clean = text_loss(model, text)
    with model.hooks(fwd_hooks=_replacing_hooks(transcoders, n_layers)):
        replaced = text_loss(model, text)
    scores = _graph_scores(model, transcoders, text, recipe)
    return {
        "layers": layers,
        "ce_loss_clean": clean,
        "ce_loss_replaced": replaced,
        "ce_loss_added": replaced - clean,
        "eval_tokens": n_tokens,
        **scores,
    }


def _replacing_hooks(transcoders: TranscoderSet, n_layers: int) -> list[tuple[str, Any]]:
    """Hooks that replace each MLP's output by its transcoder's prediction."""
    inputs: dict[int, Tensor] = {}
    hooks: list[tuple[str, Any]] = []
    for layer in range(n_layers):

        def record(activation: Tensor, hook: Any, layer: int = layer) -> None:
            inputs[layer] = activation

        def replace(activation: Tensor, hook: Any, layer: int = layer) -> Tensor:
            return transcoders[layer].reconstruct(inputs[layer], hooked=False)

        hooks += [(f"blocks.{layer}.{HARVEST_HOOKS[0]}", record)]
        hooks += [(f"blocks.{layer}.{HARVEST_HOOKS[1]}", replace)]
    return hooks


def score_prompts(text: str, recipe: TranscoderRecipe = TranscoderRecipe()) -> list[str]:
    """``n_score_prompts`` prompts of ``score_prompt_chars`` characters, evenly spaced
    through ``text`` (the held-out text), each starting at a speech (its speaker's name)."""
    stride = len(text) // recipe.n_score_prompts
    prompts = []
    for i in range(recipe.n_score_prompts):
        start = text.index("\n\n", i * stride) + 2
        prompts.append(text[start : start + recipe.score_prompt_chars])
    return prompts


def _graph_scores(
    model: HookedTransformer, transcoders: TranscoderSet, text: str, recipe: TranscoderRecipe
) -> dict[str, Any]:
    replacement = ReplacementModel.from_model(model, transcoders)
    replacement_scores, completeness_scores = [], []
    for prompt in score_prompts(text, recipe):
        graph = attribute(prompt, replacement, batch_size=256)
        replacement_score, completeness_score = compute_graph_scores(graph)
        replacement_scores.append(replacement_score)
        completeness_scores.append(completeness_score)
    return {
        "score_prompts": score_prompts(text, recipe),
        "replacement_scores": replacement_scores,
        "completeness_scores": completeness_scores,
        "replacement_score": sum(replacement_scores) / len(replacement_scores),
        "completeness_score": sum(completeness_scores) / len(completeness_scores),
    }


def quick_figures(
    folder: str | Path | None = None, recipe: TranscoderRecipe = TranscoderRecipe()
) -> dict[str, Any]:
    """The figures on the first ``QUICK_EVAL_CHARS`` held-out characters, with one graph of
    32 characters (what ``tests/circuits/test_circuits_shipped.py`` recomputes), of the set in
    ``folder`` (default: the shipped one)."""

    torch.set_num_threads(recipe.threads)
    transcoders = load_transcoders(folder or SHIPPED_NAME)
    text = split_text(default_text())[1][:QUICK_EVAL_CHARS]
    quick = replace(recipe, n_score_prompts=1, score_prompt_chars=32)
    return transcoder_figures(interp.load_model(recipe.model), transcoders, quick, text)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m interp.circuits.train_transcoders",
        description="Train the shipped skip transcoders of shakespeare-char.",
    )
    parser.add_argument("--out", required=True, type=Path, help="the folder to write")
    parser.add_argument("--steps", type=int, default=TranscoderRecipe.steps)
    parser.add_argument("--k", type=int, default=TranscoderRecipe.k)
    parser.add_argument("--expansion", type=int, default=TranscoderRecipe.expansion)
    parser.add_argument("--seed", type=int, default=TranscoderRecipe.seed)
    args = parser.parse_args(argv)
    recipe = TranscoderRecipe(steps=args.steps, k=args.k, expansion=args.expansion, seed=args.seed)
    transcoders, figures = train_transcoders(recipe)
    transcoders.save(args.out)
    quick = quick_figures(args.out, recipe)
    record = {"recipe": asdict(recipe), "figures": figures, "figures_quick": quick}
    (args.out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
