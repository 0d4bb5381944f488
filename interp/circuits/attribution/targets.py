"""circuit-tracer's ``attribution.targets``: what an attribution graph's output nodes are.

``AttributionTargets`` turns one of four specifications into the output nodes' labels
(``LogitTarget``), weights and ``[d_model]`` directions:

- ``None``: the most probable tokens, until their probabilities sum to
  ``desired_logit_prob`` (at most ``max_n_logits``);
- a tensor of token ids, or a sequence of token strings (each must be one token): those
  tokens, weighted by their probability, each along its demeaned unembedding column;
- a sequence of ``CustomTarget`` (or ``(token_str, prob, vec)`` tuples): any direction,
  with the given weight; its ``vocab_idx`` is a virtual id ``d_vocab + i``.

Example:
    >>> shakespeare = interp.load_model("shakespeare-char")
    >>> logits = shakespeare("ROMEO:\\nIt seems she hangs upon the chee")[0, -1]  # [d_vocab]
    >>> targets = AttributionTargets(["k"], logits, shakespeare.W_U, shakespeare.tokenizer)
    >>> targets.logit_vectors.shape   # [1, d_model]
    torch.Size([1, 128])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from jaxtyping import Float
from torch import Tensor

from interp.circuits.attribution.logit_targets import CustomTarget
from interp.circuits.graph import LogitTarget

TargetSpec = CustomTarget | tuple[str, float, Tensor]

__all__ = ["AttributionTargets", "CustomTarget", "LogitTarget", "TargetSpec"]


class AttributionTargets:
    """Output nodes: ``logit_targets`` (labels and vocabulary ids), ``logit_probabilities``
    ``[k]`` and ``logit_vectors`` ``[k, d_model]``, from a specification (module docstring).

    ``unembed_proj`` is ``[d_model, d_vocab]`` (TransformerLens's ``W_U``) or
    ``[d_vocab, d_model]``; its vocabulary axis is the one as long as ``logits``.
    """

    def __init__(
        self,
        attribution_targets: Sequence[str] | Sequence[TargetSpec] | Tensor | None,
        logits: Float[Tensor, " d_vocab"],
        unembed_proj: Tensor,
        tokenizer: Any,
        *,
        max_n_logits: int = 10,
        desired_logit_prob: float = 0.95,
    ) -> None:
        self.tokenizer = tokenizer
        spec = attribution_targets
        if spec is None:
            probs = torch.softmax(logits, dim=-1)
            top_p, top_ids = torch.topk(probs, min(max_n_logits, len(probs)))
            cutoff = int(torch.searchsorted(torch.cumsum(top_p, 0), desired_logit_prob)) + 1
            found = self._vocabulary(top_ids[:cutoff], logits, unembed_proj)
        elif isinstance(spec, Tensor):
            found = self._vocabulary(spec, logits, unembed_proj)
        elif isinstance(spec, Sequence) and not isinstance(spec, str):
            if len(spec) == 0:
                raise ValueError(
                    "attribution_targets sequence cannot be empty; pass None for the most "
                    "probable tokens."
                )
            if isinstance(spec[0], str):
                ids = torch.tensor([self._one_token(text) for text in spec], dtype=torch.long)
                found = self._vocabulary(ids, logits, unembed_proj)
            elif isinstance(spec[0], tuple):
                found = self._custom(spec, len(logits))
            else:
                raise TypeError(
                    "Sequence elements must be str or TargetSpec (CustomTarget or "
                    f"(token_str, prob, vec) tuple); got {type(spec[0]).__name__}. Token ids "
                    "go in a tensor: torch.tensor([...])."
                )
        else:
            raise TypeError(
                "attribution_targets must be None, a tensor of token ids, a sequence of token "
                f"strings or of CustomTargets; got {type(spec).__name__}."
            )
        self.logit_targets, self.logit_probabilities, self.logit_vectors = found

    # ----------------------------------------------------------------- the four forms
    def _labels(self, ids: Tensor) -> list[LogitTarget]:
        return [LogitTarget(self.tokenizer.decode(i), i) for i in ids.tolist()]

    def _vocabulary(
        self, ids: Tensor, logits: Tensor, unembed_proj: Tensor
    ) -> tuple[list[LogitTarget], Tensor, Tensor]:
        """Vocabulary tokens: probability and demeaned unembedding column of each."""
        if ids.is_floating_point() or ids.is_complex():
            raise TypeError(f"Token ids must be integers; got a {ids.dtype} tensor.")
        ids = ids.long().flatten()
        d_vocab = len(logits)
        bad = ids[(ids < 0) | (ids >= d_vocab)]
        if len(bad):
            raise ValueError(f"Token indices must be in range [0, {d_vocab}); got {bad.tolist()}.")
        probs = torch.softmax(logits, dim=-1)[ids]
        vocab_first = unembed_proj.shape[0] == d_vocab  # [d_vocab, d_model]
        columns = unembed_proj if vocab_first else unembed_proj.T  # [d_vocab, d_model]
        vectors = columns[ids] - columns.mean(dim=0, keepdim=True)
        return self._labels(ids), probs, vectors

    def _one_token(self, text: str) -> int:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise ValueError(
                f"Target {text!r} encoded to {len(ids)} tokens {list(ids)}; each string must "
                "be exactly one token (pass its token id, or a CustomTarget for other directions)."
            )
        return int(ids[0])

    @staticmethod
    def _custom(
        spec: Sequence[TargetSpec], d_vocab: int
    ) -> tuple[list[LogitTarget], Tensor, Tensor]:
        """Custom directions, each with a virtual id after the vocabulary."""
        labels, probs, vectors = [], [], []
        for i, target in enumerate(spec):
            if not isinstance(target, tuple) or len(target) != 3:
                size = len(target) if isinstance(target, tuple) else type(target).__name__
                raise ValueError(
                    "A custom target must have exactly 3 elements (token_str, prob, vec); "
                    f"target {i} has {size}."
                )
            token_str, prob, vec = target
            if not isinstance(token_str, str):
                raise TypeError(f"Custom target token_str must be str; got {type(token_str)}.")
            if isinstance(prob, bool) or not isinstance(prob, (int, float)):
                raise TypeError(f"Custom target prob must be int or float; got {type(prob)}.")
            if not isinstance(vec, Tensor):
                raise TypeError(f"Custom target vec must be torch.Tensor; got {type(vec)}.")
            labels.append(LogitTarget(token_str, d_vocab + i))
            probs.append(float(prob))
            vectors.append(vec)
        return labels, torch.tensor(probs), torch.stack(vectors)

    # ---------------------------------------------------------------------- views
    def __len__(self) -> int:
        return len(self.logit_targets)

    def __repr__(self) -> str:
        shown = self.logit_targets[:3]
        more = "..." if len(self) > 3 else ""
        return f"AttributionTargets(n={len(self)}, targets={shown}{more})"

    @property
    def tokens(self) -> list[str]:
        """Each target's label (a decoded token, or a custom target's string)."""
        return [target.token_str for target in self.logit_targets]

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    @property
    def token_ids(self) -> Tensor:
        """Each target's vocabulary id (virtual ids ``>= d_vocab`` for custom targets)."""
        ids = [target.vocab_idx for target in self.logit_targets]
        return torch.tensor(ids, dtype=torch.long, device=self.logit_probabilities.device)

    def to(self, device: str | torch.device) -> AttributionTargets:
        """Move the probabilities and vectors to ``device`` (in place); returns self."""
        self.logit_probabilities = self.logit_probabilities.to(device)
        self.logit_vectors = self.logit_vectors.to(device)
        return self
