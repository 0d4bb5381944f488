"""What each API route computes, from a prompt's cached forward pass: thin adapters from
``interp.analysis``, ``interp.viz.report_data`` and ``interp.patching`` to JSON-ready dicts
(the shapes of ``interp.serve.schemas``).

Example:
    >>> from interp.serve.worker import Workers
    >>> worker = Workers({"attn-only-2l": interp.load_model("attn-only-2l")})["attn-only-2l"]
    >>> prompt_summary(worker, "1 2 3 1 2")["top_predictions"][0]["token"]
    '3'
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from interp.analysis import (
    HEAD_THRESHOLD,
    direct_logit_attribution,
    logit_lens,
    strongest_heads,
)
from interp.patching import (
    LogitDiff,
    generic_activation_patch,
    layer_head_vector_patch_setter,
    layer_pos_patch_setter,
)
from interp.serve.errors import ApiError
from interp.serve.worker import ModelWorker
from interp.viz.html import escape_text, html_page
from interp.viz.report_data import (
    HEAD_KINDS,
    answer_ids,
    patching_gap_warning,
    prompt_head_scores,
    top_predictions_by_stage,
)

TOP_K = 10
SAE_TOP_K = 5
SAE_LOGITS = 10  # promoted and suppressed tokens on a feature page
STEP_ROWS = 32  # patched runs per job step: the model's lock is let go between steps


def _rows(values: Tensor) -> list:
    """A float tensor as nested lists, NaN as None (JSON has no NaN)."""
    return [
        _rows(row) if row.ndim else (None if math.isnan(v := float(row)) else v) for row in values
    ]


def prompt_summary(worker: ModelWorker, prompt: str) -> dict[str, Any]:
    """The tokens and the top next-token predictions at the end of the prompt."""
    entry = worker.forward(prompt)
    probs = entry.last_logits.softmax(-1)
    top_probs, top_ids = probs.topk(min(TOP_K, probs.shape[0]))
    token_str = worker.model.tokenizer.token_str
    return {
        "model": worker.name,
        "tokens": entry.str_tokens,
        "token_ids": entry.tokens[0].tolist(),
        "top_predictions": [
            {"token": token_str(int(i)), "token_id": int(i), "prob": float(p)}
            for i, p in zip(top_ids, top_probs, strict=True)
        ],
    }


def attention(worker: ModelWorker, prompt: str, layer: int, head: int | None) -> dict[str, Any]:
    """One layer's patterns [head, query, key] (or one head's, [1, query, key])."""
    worker.check_layer_head(layer, head)
    entry = worker.forward(prompt)
    patterns = entry.cache["pattern", layer][0].float()  # [n_heads, query, key]
    if head is not None:
        patterns = patterns[head : head + 1]
    return {
        "model": worker.name,
        "tokens": entry.str_tokens,
        "layer": layer,
        "head": head,
        "patterns": [[[round(v, 5) for v in row] for row in p] for p in patterns.tolist()],
    }


def lens(worker: ModelWorker, prompt: str) -> dict[str, Any]:
    """The logit lens: the top-1 prediction and its probability at every stage and position."""
    entry = worker.forward(prompt)

    def compute() -> dict[str, Any]:
        result = logit_lens(worker.model, entry.tokens, cache=entry.cache, top_k=1)
        probs, tokens = top_predictions_by_stage(result)
        return {"stages": result.labels, "top_tokens": tokens, "top_probs": _rows(probs)}

    return {"model": worker.name, "tokens": entry.str_tokens} | worker.derived(
        entry, "logit_lens", compute
    )


def attribution(
    worker: ModelWorker, prompt: str, answer: str | None, wrong_answer: str | None
) -> dict[str, Any]:
    """Direct logit attribution of ``answer`` (minus ``wrong_answer``) at the last position,
    by head and by MLP layer; the answer defaults to the top prediction."""
    entry = worker.forward(prompt)
    answer_id = worker.single_token(answer, "answer") if answer else int(entry.last_logits.argmax())
    wrong_id = worker.single_token(wrong_answer, "wrong answer") if wrong_answer else None
    if wrong_id == answer_id:
        raise ApiError(422, f"The answer and wrong answer are the same token ({answer!r}).")

    def compute():
        return direct_logit_attribution(
            worker.model, entry.tokens, answer_id, wrong_id, cache=entry.cache
        )

    dla = worker.derived(entry, f"dla {answer_id} {wrong_id}", compute)
    n_heads_total = dla.n_layers * dla.n_heads
    mlps = dla.mlp_attributions
    token_str = worker.model.tokenizer.token_str
    return {
        "model": worker.name,
        "tokens": entry.str_tokens,
        "answer": token_str(answer_id),
        "wrong_answer": token_str(wrong_id) if wrong_id is not None else None,
        "logit_diff": float(dla.logit_diff[0]),
        "heads": _rows(dla.head_attributions[..., 0]),
        "mlps": _rows(mlps[:, 0]) if mlps is not None else None,
        "other": {
            label: float(value)
            for label, value in zip(
                dla.labels[n_heads_total:], dla.attributions[:, 0][n_heads_total:], strict=True
            )
            if not label.endswith("_mlp_out")
        }
        | {"unembed bias": float(dla.bias_term[0])},
    }


def scores(worker: ModelWorker, prompt: str) -> dict[str, Any]:
    """Previous-token, duplicate-token and induction scores of every head on this prompt,
    and the strongest head of each kind that passes ``HEAD_THRESHOLD`` (an induction head
    only after a previous-token head: ``interp.analysis.strongest_heads``)."""
    entry = worker.forward(prompt)

    def compute():
        kinds = prompt_head_scores(worker.model, entry.tokens, entry.cache)
        best = strongest_heads({HEAD_KINDS[kind]: v for kind, v in kinds.items()})
        return {
            "scores": {kind: _rows(values) for kind, values in kinds.items()},
            "strongest": {
                kind: {"head": found[0], "score": found[1]} if found else None
                for kind, found in ((kind, best[HEAD_KINDS[kind]]) for kind in kinds)
            },
            "threshold": HEAD_THRESHOLD,
        }

    return {"model": worker.name, "tokens": entry.str_tokens} | worker.derived(
        entry, "head_scores", compute
    )


def sae_features(worker: ModelWorker, prompt: str) -> dict[str, Any]:
    """The strongest SAE features at each position (needs an SAE loaded with ``--sae``)."""
    sae = _sae(worker)
    entry = worker.forward(prompt)
    hook = sae.cfg.hook_name

    def compute():
        acts = sae.encode(entry.cache[hook][0].to(sae.dtype), hooked=False)  # [pos, d_sae]
        values, ids = acts.topk(min(SAE_TOP_K, acts.shape[-1]), dim=-1)
        return [
            [{"feature": int(i), "activation": float(v)} for v, i in zip(vs, is_, strict=True)]
            for vs, is_ in zip(values.tolist(), ids.tolist(), strict=True)
        ]

    features = worker.derived(entry, "sae_features", compute)
    return {"model": worker.name, "tokens": entry.str_tokens, "hook": hook, "features": features}


def _sae(worker: ModelWorker) -> Any:
    if worker.sae is None:
        raise ApiError(
            404, f"No SAE is loaded for {worker.name}; start the server with --sae PATH."
        )
    return worker.sae


def sae_feature_page(worker: ModelWorker, feature: int, prompt: str | None) -> str:
    """One SAE feature's page (HTML, every string escaped, no script): the tokens it promotes
    and suppresses (``top_logits``) and, given a prompt, its activation on each token."""
    from interp.sae.features import top_logits  # only with --sae, which needs interp.sae
    from interp.sae.views import FEATURE_STYLE, coloured_tokens_html, logit_table_html

    sae = _sae(worker)
    if not 0 <= feature < sae.cfg.d_sae:
        raise ApiError(
            422,
            f"Feature {feature} is out of range: {worker.name}'s SAE has features 0 to "
            f"{sae.cfg.d_sae - 1}.",
        )
    with torch.no_grad():
        logits = top_logits(worker.model, sae, feature, min(SAE_LOGITS, worker.model.cfg.d_vocab))
    name = f"{sae.cfg.hook_name} feature {feature}"
    on_prompt = ""
    if prompt is not None:
        entry = worker.forward(prompt)
        with torch.no_grad():
            acts = sae.encode(entry.cache[sae.cfg.hook_name][0].to(sae.dtype), hooked=False)
        values = acts[:, feature].float().tolist()  # [pos]
        peak = max(values)
        top = values.index(peak) if peak > 0 else None
        on_prompt = (
            "<h3>On the prompt</h3><p class='note'>The feature's activation on each token "
            f"(hover for the value; ↵ is a newline); max {peak:.3f}.</p><div class='ctx'>"
            f"{coloured_tokens_html(entry.str_tokens, values, top, peak)}</div>"
        )
    body = (
        f"<section class='feature'><h2>{escape_text(name)}</h2>"
        f"<p class='note'>Model {escape_text(worker.name)}.</p>{on_prompt}"
        "<h3>Logit weights</h3><p class='note'>The tokens this feature's decoder direction "
        "promotes and suppresses directly (through the final layer norm's weight and the "
        f"unembedding).</p>{logit_table_html(logits)}</section>"
    )
    return html_page(name, body, head=FEATURE_STYLE)


class PatchingPlan:
    """A patching sweep checked and ready to run step by step (up to ``STEP_ROWS`` patched
    runs of one layer's residual stream or heads a step), so a job can report progress, stop
    between steps, and let other requests use the model.

    Args:
        worker: the served model that runs the sweep.
        prompt: the clean prompt.
        corrupted: a prompt of the same length in tokens.
        answer: the token whose logit difference is measured (None: the clean run's top
            prediction).
        wrong_answer: the token it is measured against (None: the corrupted run's top one).

    Example:
        >>> from interp.serve.worker import Workers
        >>> worker = Workers({"attn-only-2l": model})["attn-only-2l"]
        >>> plan = PatchingPlan(worker, "1 2 3 1 2", "1 5 3 1 2", None, None)
        >>> plan.total   # steps: each layer's resid_pre, then its heads
        4
        >>> result = plan.run(lambda: None)   # the callable is called after each step
        >>> result["answer"], result["wrong_answer"]   # '3' follows '1 2' in the prompt
        ('3', ...)
    """

    def __init__(
        self,
        worker: ModelWorker,
        prompt: str,
        corrupted: str,
        answer: str | None,
        wrong_answer: str | None,
    ) -> None:
        self.worker = worker
        self.entry = worker.forward(prompt)
        self.corrupted_tokens = worker.tokenize(corrupted, "corrupted prompt")
        n_clean, n_corrupted = self.entry.tokens.shape[1], self.corrupted_tokens.shape[1]
        if n_clean != n_corrupted:
            raise ApiError(
                422,
                f"The corrupted prompt is {n_corrupted} tokens and the prompt {n_clean}"
                f"{' (BOS included)' if worker.model.cfg.default_prepend_bos else ''}; "
                "patching swaps activations position by position, so give them the same "
                "length in tokens (change words, not the number of words).",
            )
        if answer:
            worker.single_token(answer, "answer")
        if wrong_answer:
            worker.single_token(wrong_answer, "wrong answer")
        with worker.lock, torch.no_grad():
            corrupted_logits = worker.model(self.corrupted_tokens)[0, -1].float().cpu()
        try:
            self.answer_id, self.wrong_id = answer_ids(
                worker.model, self.entry.last_logits, corrupted_logits, answer, wrong_answer
            )
        except ValueError as error:
            raise ApiError(422, str(error)) from error
        self.clean_diff = float(
            self.entry.last_logits[self.answer_id] - self.entry.last_logits[self.wrong_id]
        )
        self.corrupted_diff = float(
            corrupted_logits[self.answer_id] - corrupted_logits[self.wrong_id]
        )
        cfg, n_pos = worker.model.cfg, n_clean
        self.steps = [
            (layer, kind, rows[start : start + STEP_ROWS])
            for layer in range(cfg.n_layers)
            for kind, rows in (
                ("resid_pre", [(layer, pos) for pos in range(n_pos)]),
                ("heads", [(layer, head) for head in range(cfg.n_heads)]),
            )
            for start in range(0, len(rows), STEP_ROWS)
        ]
        self.total = len(self.steps)

    def _sweep(self, activation: str, setter: Callable, rows: list[tuple[int, int]]) -> list:
        with self.worker.lock, torch.no_grad():
            values = generic_activation_patch(
                self.worker.model,
                self.corrupted_tokens,
                self.entry.cache,
                LogitDiff(torch.tensor([self.answer_id, self.wrong_id])),
                setter,
                activation,
                index_df=rows,
                progress=False,
            )
        span = self.clean_diff - self.corrupted_diff
        values = values.as_subclass(Tensor).float().cpu()
        if abs(span) > 1e-6:
            values = (values - self.corrupted_diff) / span
        return _rows(values)

    def run(self, step: Callable[[], None]) -> dict[str, Any]:
        """Every step (each holds the model's lock for one batch of patched runs, so other
        requests go between), calling ``step()`` after each (it may raise to stop the run)."""
        n_layers = self.worker.model.cfg.n_layers
        results = {
            "resid_pre": [[] for _ in range(n_layers)],
            "heads": [[] for _ in range(n_layers)],
        }
        sweeps = {
            "resid_pre": ("resid_pre", layer_pos_patch_setter),
            "heads": ("z", layer_head_vector_patch_setter),
        }
        for layer, kind, rows in self.steps:
            results[kind][layer] += self._sweep(*sweeps[kind], rows)
            step()
        token_str = self.worker.model.tokenizer.token_str
        return {
            "tokens": self.entry.str_tokens,
            "corrupted_tokens": self.worker.model.to_str_tokens(self.corrupted_tokens),
            "answer": token_str(self.answer_id),
            "wrong_answer": token_str(self.wrong_id),
            "clean_logit_diff": self.clean_diff,
            "corrupted_logit_diff": self.corrupted_diff,
            "normalised": abs(self.clean_diff - self.corrupted_diff) > 1e-6,
            "warning": patching_gap_warning(self.clean_diff, self.corrupted_diff),
            "resid_pre": results["resid_pre"],
            "heads": results["heads"],
        }
