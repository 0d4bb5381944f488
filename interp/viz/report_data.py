"""What the HTML report shows about one prompt, computed from one cached forward pass (and,
with a corrupted prompt, one batched patching sweep).

The logit lens and head scores come from ``interp.analysis``, the residual-stream patching
sweep from ``interp.patching``. Each quantity is a small function of the model and cache, so the
report stays a thin renderer and the numbers can be checked on their own.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.analysis import HEAD_THRESHOLD, LogitLens, head_scores, logit_lens, strongest_heads
from interp.cache import ActivationCache
from interp.model import HookedTransformer
from interp.patching import LogitDiff, get_act_patch_resid_pre

HEAD_SCORE_NAMES = {
    "previous_token_head": "previous token",
    "duplicate_token_head": "duplicate token",
    "induction_head": "induction",
}
HEAD_KINDS = {name: kind for kind, name in HEAD_SCORE_NAMES.items()}


# Below this gap between the clean and corrupted logit differences (in logits), normalising
# by it divides by noise: a patched run 0.1 logits off reads as 0.2 of the way at a gap of 0.5.
MIN_PATCHING_GAP = 0.5


def patching_gap_warning(clean_logit_diff: float, corrupted_logit_diff: float) -> str | None:
    """A warning when the clean and corrupted runs' metrics are too close to normalise by
    (``|clean - corrupted| < MIN_PATCHING_GAP``), else ``None``.

    Example:
        >>> patching_gap_warning(3.0, -1.0) is None, patching_gap_warning(1.2, 1.0)[:44]
        (True, 'The clean and corrupted logit differences (1')
    """
    gap = abs(clean_logit_diff - corrupted_logit_diff)
    if gap >= MIN_PATCHING_GAP:
        return None
    return (
        f"The clean and corrupted logit differences ({clean_logit_diff:.3f} and "
        f"{corrupted_logit_diff:.3f}) differ by {gap:.3f}, under {MIN_PATCHING_GAP}: the "
        "patching metric is ill-conditioned and its normalised values (0 = corrupted, "
        "1 = clean) are unreliable; pick a corrupted prompt or answers the runs disagree on."
    )


@dataclass
class PatchingResult:
    """Residual-stream patching: ``results[layer, pos]`` is the logit difference
    ``answer - wrong_answer`` after patching the clean ``resid_pre`` there, normalised
    (0 = the corrupted run, 1 = the clean run) unless the two runs' differences are equal."""

    corrupted_tokens: list[str]
    answer: str
    wrong_answer: str
    results: Float[Tensor, "n_layers pos"]
    normalised: bool
    clean_logit_diff: float
    corrupted_logit_diff: float


@dataclass
class PromptAnalysis:
    """Everything the report shows for one prompt."""

    model_name: str
    model_shape: str
    tokens: list[str]
    patterns: list[Float[Tensor, "head query_pos key_pos"]]
    top_predictions: list[tuple[str, float]]
    logit_lens: LogitLens
    head_scores: dict[str, Float[Tensor, "n_layers n_heads"]]
    patching: PatchingResult | None = None
    warnings: list[str] = field(default_factory=list)

    def top_heads(self) -> dict[str, tuple[str, float] | None]:
        """The best head of each score kind, ``{kind: ("L1H3", score)}``, or ``None`` where
        no head reaches ``HEAD_THRESHOLD``; an induction head must have a previous-token
        head above it in an earlier layer (``interp.analysis.strongest_heads``), so layer 0
        has none."""
        by_name = {HEAD_KINDS[kind]: scores for kind, scores in self.head_scores.items()}
        best = strongest_heads(by_name, HEAD_THRESHOLD)
        return {kind: best[HEAD_KINDS[kind]] for kind in self.head_scores}


def prompt_head_scores(
    model: HookedTransformer, tokens: Int[Tensor, "1 pos"], cache: ActivationCache
) -> dict[str, Float[Tensor, "n_layers n_heads"]]:
    """``interp.analysis.head_scores`` on this prompt, keyed by readable kind names: the
    fraction of each head's attention that falls where a head of that kind attends.

    Example:
        >>> scores = prompt_head_scores(model, tokens, cache)
        >>> list(scores)
        ['previous token', 'duplicate token', 'induction']
        >>> scores["induction"].shape   # [n_layers, n_heads]
        torch.Size([2, 1])
    """
    scores = head_scores(model, tokens, cache=cache)
    return {HEAD_SCORE_NAMES[kind]: values.cpu() for kind, values in scores.items()}


def top_predictions_by_stage(lens: LogitLens) -> tuple[Float[Tensor, "n_stages pos"], list]:
    """The logit lens's top-1 probability [n_stages, pos] and token string ``[stage][pos]``
    for the first prompt of the batch.

    Example:
        >>> probs, predictions = top_predictions_by_stage(logit_lens(model, tokens))
        >>> probs.shape, len(predictions), len(predictions[0])   # [n_stages, pos]: 0_pre ...
        (torch.Size([3, 21]), 3, 21)
    """
    probs = lens.top_probs[:, 0, :, 0].cpu()
    ids = lens.top_tokens[:, 0, :, 0].tolist()
    return probs, [[lens.tokenizer.token_str(i) for i in row] for row in ids]


def answer_ids(
    model: HookedTransformer,
    clean_logits: Float[Tensor, " d_vocab"],
    corrupted_logits: Float[Tensor, " d_vocab"],
    answer: str | None,
    wrong_answer: str | None,
) -> tuple[int, int]:
    """The answer (default: the clean top prediction) and the wrong answer (default: the
    corrupted run's top prediction other than the answer)."""
    answer_id = model.to_single_token(answer) if answer else int(clean_logits.argmax())
    if wrong_answer:
        wrong_id = model.to_single_token(wrong_answer)
    else:
        ranked = corrupted_logits.argsort(descending=True)
        wrong_id = int(ranked[0]) if int(ranked[0]) != answer_id else int(ranked[1])
    if wrong_id == answer_id:
        raise ValueError(
            f"The answer and wrong answer are the same token ({answer!r}); pass two different "
            "tokens, e.g. answer=' Mary', wrong_answer=' John'."
        )
    return answer_id, wrong_id


class PromptTooLongError(ValueError):
    """A prompt longer than the model's context (the command line's usage error, exit 2)."""


def prompt_tokens(
    model: HookedTransformer, prompt: str, what: str = "prompt"
) -> Int[Tensor, "1 pos"]:
    """``prompt``'s tokens [1, pos] (BOS first, as the model does by default), never cut
    short: a prompt longer than the model's context is a ``PromptTooLongError`` (a
    ``ValueError``) saying its length in tokens and ``n_ctx`` (``what`` names the prompt).

    Example:
        >>> prompt_tokens(model, "7 12 305").shape   # BOS and three numbers
        torch.Size([1, 4])
    """
    tokens = model.to_tokens(prompt, truncate=False)
    n_tokens, n_ctx = tokens.shape[1], model.cfg.n_ctx
    if n_tokens > n_ctx:
        raise PromptTooLongError(
            f"The {what} is {n_tokens} tokens, longer than the context of "
            f"{model.cfg.model_name} (n_ctx={n_ctx}); shorten it to at most {n_ctx} tokens "
            "(a BOS token included)."
        )
    return tokens


def analyse_prompt(
    model: HookedTransformer,
    prompt: str,
    corrupted_prompt: str | None = None,
    answer: str | None = None,
    wrong_answer: str | None = None,
) -> PromptAnalysis:
    """Run ``prompt`` once with a cache and compute everything the report shows; with a
    ``corrupted_prompt`` of the same token length, also the residual-stream patching sweep.
    A prompt longer than the model's context is a ``ValueError`` (``prompt_tokens``).

    Example:
        >>> analysis = analyse_prompt(model, "7 12 305 9 44 7 12 305 9",
        ...                           corrupted_prompt="7 12 305 9 44 7 12 305 44")
        >>> analysis.top_predictions[0][0], analysis.patching.wrong_answer   # 44 follows 9
        ('44', '7')
        >>> analysis.top_heads()
        {'previous token': ('L0H0', 0.88), 'duplicate token': None, 'induction': ('L1H0', 0.40)}
    """
    if not prompt:
        raise ValueError("The prompt is empty; pass some text, e.g. --prompt 'The cat sat'.")
    tokens = prompt_tokens(model, prompt)  # [1, pos]
    with torch.no_grad():
        logits, cache = model.run_with_cache(
            tokens,
            names_filter=lambda name: name.endswith("hook_pattern") or "hook_resid_" in name,
        )
    probs = logits[0, -1].float().softmax(dim=-1)
    top_probs, top_ids = probs.topk(min(5, probs.shape[0]))
    cfg = model.cfg
    shape = (
        f"{cfg.n_layers} layers, {cfg.n_heads} head{'s' if cfg.n_heads > 1 else ''} per layer, "
        f"d_model={cfg.d_model}, "
        f"{'attention-only' if cfg.attn_only else f'd_mlp={cfg.d_mlp}'}, d_vocab={cfg.d_vocab}"
    )
    analysis = PromptAnalysis(
        model_name=cfg.model_name,
        model_shape=shape,
        tokens=model.to_str_tokens(tokens),
        patterns=[cache["pattern", layer][0].float().cpu() for layer in range(cfg.n_layers)],
        top_predictions=[
            (model.tokenizer.token_str(int(i)), float(p))
            for i, p in zip(top_ids, top_probs, strict=True)
        ],
        logit_lens=logit_lens(model, tokens, cache=cache),
        head_scores=prompt_head_scores(model, tokens, cache),
    )
    if corrupted_prompt is not None:
        analysis.patching = _patching(
            model, tokens, corrupted_prompt, cache, logits, answer, wrong_answer
        )
        gap = patching_gap_warning(
            analysis.patching.clean_logit_diff, analysis.patching.corrupted_logit_diff
        )
        analysis.warnings += [gap] if gap else []
    return analysis


def _patching(
    model: HookedTransformer,
    tokens: Int[Tensor, "1 pos"],
    corrupted_prompt: str,
    clean_cache: ActivationCache,
    clean_logits: Float[Tensor, "1 pos d_vocab"],
    answer: str | None,
    wrong_answer: str | None,
) -> PatchingResult:
    corrupted_tokens = prompt_tokens(model, corrupted_prompt, "corrupted prompt")
    if corrupted_tokens.shape != tokens.shape:
        raise ValueError(
            f"The corrupted prompt has {corrupted_tokens.shape[1]} tokens and the prompt "
            f"{tokens.shape[1]}; patching swaps activations position by position, so make "
            "them the same length in tokens (change words, not the number of words)."
        )
    with torch.no_grad():
        corrupted_logits = model(corrupted_tokens)
    answer_id, wrong_id = answer_ids(
        model, clean_logits[0, -1], corrupted_logits[0, -1], answer, wrong_answer
    )

    def logit_diff(logits: Tensor) -> float:
        return float(logits[0, -1, answer_id] - logits[0, -1, wrong_id])

    clean_diff, corrupted_diff = logit_diff(clean_logits), logit_diff(corrupted_logits)
    patched = get_act_patch_resid_pre(
        model,
        corrupted_tokens,
        clean_cache,
        LogitDiff(torch.tensor([answer_id, wrong_id])),
        progress=False,
    ).as_subclass(Tensor)  # [n_layers, pos]
    span = clean_diff - corrupted_diff
    normalised = abs(span) > 1e-6
    return PatchingResult(
        corrupted_tokens=model.to_str_tokens(corrupted_tokens),
        answer=model.tokenizer.token_str(answer_id),
        wrong_answer=model.tokenizer.token_str(wrong_id),
        results=((patched - corrupted_diff) / span if normalised else patched).float().cpu(),
        normalised=normalised,
        clean_logit_diff=clean_diff,
        corrupted_logit_diff=corrupted_diff,
    )
