"""The prompt's tokens and the graph's output nodes: the logits ``attribute`` explains (the
most probable up to ``desired_logit_prob``, or the ids, strings or ``CustomTarget``s asked
for), each with its probability and its demeaned unembedding direction."""

from __future__ import annotations

from typing import Any, NamedTuple

import torch
from jaxtyping import Float
from torch import Tensor

from interp.circuits.graph import LogitTarget
from interp.circuits.replacement_model import ReplacementModel


class CustomTarget(NamedTuple):
    """An output node with its own direction: a label, a weight and a ``[d_model]`` vector."""

    token_str: str
    prob: float
    vec: Tensor


class _Targets(NamedTuple):
    targets: list[LogitTarget]
    probabilities: Float[Tensor, " n"]
    vectors: Float[Tensor, "n d_model"]


def ensure_tokenized(prompt: str | Tensor | list[int], model: ReplacementModel) -> Tensor:
    """1-D token ids; a special token (the first of bos, pad, eos, ... that is set) is
    prepended unless the first token is one (circuit-tracer's rule, for tokens too)."""
    tokenizer = model.tokenizer
    if isinstance(prompt, str):
        if tokenizer is None:
            raise ValueError("A text prompt needs model.tokenizer; pass token ids instead.")
        tokens = torch.tensor(tokenizer.encode(prompt, add_special_tokens=False))
    elif isinstance(prompt, Tensor):
        tokens = prompt.squeeze()
    elif isinstance(prompt, (list, tuple)):
        tokens = torch.tensor(list(prompt), dtype=torch.long).squeeze()
    else:
        raise TypeError(f"prompt must be a str, a tensor or a list of ids; got {type(prompt)}.")
    if tokens.ndim == 0:
        tokens = tokens[None]
    if tokens.ndim != 1 or tokens.is_floating_point() or len(tokens) == 0:
        raise ValueError(
            f"prompt tokens must be one non-empty sequence of ids; got shape "
            f"{tuple(tokens.shape)} and dtype {tokens.dtype}."
        )
    tokens = tokens.long().to(model.cfg.device)
    if tokenizer is not None and int(tokens[0]) not in tokenizer.all_special_ids:
        candidates = [tokenizer.bos_token_id, tokenizer.pad_token_id, tokenizer.eos_token_id]
        special = next(filter(None, [*candidates, *tokenizer.all_special_ids]), None)
        if special is not None:
            tokens = torch.cat([tokens.new_tensor([special]), tokens])
    if (tokens < 0).any() or (tokens >= model.cfg.d_vocab).any():
        raise ValueError(f"Token ids must be in [0, {model.cfg.d_vocab}); got {tokens.tolist()}.")
    if len(tokens) > model.cfg.n_ctx:
        raise ValueError(
            f"The prompt has {len(tokens)} tokens (with the prepended special token) but the "
            f"model's context is n_ctx={model.cfg.n_ctx}; shorten it."
        )
    return tokens


def _decode(model: ReplacementModel, ids: Any) -> str:
    if model.tokenizer is None:
        return " ".join(str(i) for i in torch.as_tensor(ids).flatten().tolist())
    return model.tokenizer.decode(ids)


def _logit_targets(
    spec: Any,
    logits: Float[Tensor, " d_vocab"],
    model: ReplacementModel,
    max_n_logits: int,
    desired_logit_prob: float,
) -> _Targets:
    """The output nodes: salient logits (by cumulative probability), given ids or token
    strings, or ``CustomTarget``s; each with its probability and demeaned unembedding."""
    probs = torch.softmax(logits.float(), dim=-1)
    unembed = model.unembed.W_U  # [d_model, d_vocab]
    if spec is not None and len(spec) > 0 and isinstance(spec[0], tuple):
        try:
            custom = [CustomTarget(str(token), float(prob), vec) for token, prob, vec in spec]
        except (TypeError, ValueError):
            raise TypeError(
                "A custom attribution target is a (token_str, prob, vec) tuple (CustomTarget), "
                f"with prob a number; got {[type(t).__name__ for t in spec[0]]} first."
            ) from None
        for target in custom:
            vec = target.vec
            if not isinstance(vec, Tensor) or vec.shape != (model.cfg.d_model,):
                shape = tuple(vec.shape) if isinstance(vec, Tensor) else type(vec).__name__
                raise ValueError(
                    f"CustomTarget {target.token_str!r}: vec must be a [d_model="
                    f"{model.cfg.d_model}] tensor (a direction in the residual stream after "
                    f"ln_final); got {shape}."
                )
            if not torch.isfinite(vec).all():
                raise ValueError(f"CustomTarget {target.token_str!r}: vec has NaN or inf entries.")
        targets = [LogitTarget(t.token_str, model.cfg.d_vocab + i) for i, t in enumerate(custom)]
        probabilities = torch.tensor([float(t.prob) for t in custom])
        vectors = torch.stack([t.vec.to(unembed) for t in custom])
        return _Targets(targets, probabilities, vectors)
    if spec is None:
        top_p, top_idx = torch.topk(probs, min(max_n_logits, len(probs)))
        cutoff = int(torch.searchsorted(torch.cumsum(top_p, 0), desired_logit_prob)) + 1
        indices = top_idx[:cutoff]
    elif isinstance(spec, Tensor) or all(isinstance(i, int) for i in spec):
        if isinstance(spec, Tensor) and (spec.is_floating_point() or spec.is_complex()):
            raise TypeError(f"attribution_targets as a tensor holds token ids; got {spec.dtype}.")
        indices = torch.as_tensor(spec, dtype=torch.long, device=probs.device).flatten()
    elif all(isinstance(s, str) for s in spec):
        ids = [model.tokenizer.encode(s, add_special_tokens=False) for s in spec]
        bad = [s for s, i in zip(spec, ids, strict=True) if len(i) != 1]
        if bad:
            raise ValueError(f"Targets {bad} are not single tokens; give one token each.")
        indices = torch.tensor([i[0] for i in ids], device=probs.device)
    else:
        raise TypeError(
            "attribution_targets must be None, token ids, token strings or CustomTargets."
        )
    if len(indices) == 0 or (indices < 0).any() or (indices >= len(probs)).any():
        raise ValueError(f"Target ids {indices.tolist()} must be non-empty, in [0, {len(probs)}).")
    vectors = (unembed[:, indices] - unembed.mean(dim=-1, keepdim=True)).T
    targets = [LogitTarget(_decode(model, i), i) for i in indices.tolist()]
    return _Targets(targets, probs[indices], vectors)
