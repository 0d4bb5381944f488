"""The logit lens: read the residual stream at every depth through the final norm and unembed.

Each stage of ``cache.accumulated_resid`` (entering each block, and after each attention
sublayer with ``incl_mid``) goes through ``ln_final`` (with its statistics recomputed for that
stage) and the unembedding, as if the model stopped there. The last stage is the model's
own output.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

if TYPE_CHECKING:
    from interp.cache import ActivationCache
    from interp.model import HookedTransformer


@dataclass
class LogitLens:
    """Logit-lens predictions at every stage.

    ``labels[s]`` names stage s (``"0_pre"``, ``"0_mid"``, ..., ``"final_post"``).
    ``correct_probs[s, b, p]`` and ``correct_ranks`` (0 = top prediction) are for the actual
    next token ``tokens[b, p + 1]``.
    """

    labels: list[str]
    tokens: Int[Tensor, "batch pos"]
    top_tokens: Int[Tensor, "stage batch pos k"]
    top_probs: Float[Tensor, "stage batch pos k"]
    correct_probs: Float[Tensor, "stage batch pos_minus_1"]
    correct_ranks: Int[Tensor, "stage batch pos_minus_1"]
    tokenizer: Any = None

    def table(self) -> list[dict[str, Any]]:
        """One row per (stage, batch, pos, rank) with the predicted token and its
        probability, and the actual next token's probability and rank (None at the last
        position). ``pandas.DataFrame(lens.table())`` makes a data frame of it.

        Example:
            >>> rows = logit_lens(model, tokens, top_k=2).table()
            >>> len(rows)   # 3 stages ('0_pre', '1_pre', 'final_post') x 21 positions x top 2
            126
            >>> rows[-4]   # the output's top prediction at position 19, in the repeated copy
            {'stage': 'final_post', 'batch': 0, 'pos': 19, 'rank': 0, 'token_id': 211,
             'token': '211', 'prob': 0.995, 'next_token_id': 211, 'next_token_prob': 0.995,
             'next_token_rank': 0}
        """

        def token_text(token_id: int) -> str | None:
            return self.tokenizer.token_str(token_id) if self.tokenizer is not None else None

        n_stages, n_batch, n_pos, k = self.top_tokens.shape
        top_tokens, top_probs = self.top_tokens.tolist(), self.top_probs.tolist()
        correct_probs, correct_ranks = self.correct_probs.tolist(), self.correct_ranks.tolist()
        token_ids = self.tokens.tolist()
        rows = []
        for stage in range(n_stages):
            for batch in range(n_batch):
                for pos in range(n_pos):
                    has_next = pos + 1 < n_pos
                    next_id = token_ids[batch][pos + 1] if has_next else None
                    for rank in range(k):
                        token_id = top_tokens[stage][batch][pos][rank]
                        rows.append(
                            {
                                "stage": self.labels[stage],
                                "batch": batch,
                                "pos": pos,
                                "rank": rank,
                                "token_id": token_id,
                                "token": token_text(token_id),
                                "prob": top_probs[stage][batch][pos][rank],
                                "next_token_id": next_id,
                                "next_token_prob": (
                                    correct_probs[stage][batch][pos] if has_next else None
                                ),
                                "next_token_rank": (
                                    correct_ranks[stage][batch][pos] if has_next else None
                                ),
                            }
                        )
        return rows


@torch.no_grad()
def logit_lens(
    model: HookedTransformer,
    tokens: Int[Tensor, "batch pos"] | str | list[str],
    cache: ActivationCache | None = None,
    top_k: int = 5,
    incl_mid: bool = True,
) -> LogitLens:
    """Top-k predictions and the actual next token's probability at every stage.

    Stages are the stream entering each block and, with ``incl_mid`` (models with MLPs),
    after each attention sublayer, then the final stream. A given ``cache`` must hold these
    tokens' residual streams.

    Example:
        >>> shakespeare = interp.load_model("shakespeare-char")   # 4 layers with MLPs
        >>> lens = logit_lens(shakespeare, "ROMEO: What say")
        >>> lens.labels
        ['0_pre', '0_mid', '1_pre', '1_mid', '2_pre', '2_mid', '3_pre', '3_mid', 'final_post']
        >>> shakespeare.to_str_tokens(lens.top_tokens[-1, 0, -1])   # the model's own top 5
        [' ', ',', 's', "'", '.']
        >>> lens.correct_ranks[:, 0, -1]   # the rank of "y" after "...sa" at every stage
        tensor([7, 3, 3, 3, 0, 0, 0, 0, 0])
    """
    if isinstance(tokens, (str, list)):
        tokens = model.to_tokens(tokens)
    tokens = tokens if tokens.ndim == 2 else tokens[None]
    if cache is None:
        _, cache = model.run_with_cache(
            tokens, names_filter=lambda name: "hook_resid_" in name, return_type=None
        )
    stack, labels = cache.accumulated_resid(incl_mid=incl_mid, return_labels=True)
    if not cache.has_batch_dim:
        stack = stack[:, None]
    if stack.shape[1:3] != tokens.shape:
        raise ValueError(
            f"The cache's residual streams are [batch, pos] = {tuple(stack.shape[1:3])} but "
            f"tokens are {tuple(tokens.shape)}: pass the cache of these tokens."
        )
    if not 1 <= top_k <= model.cfg.d_vocab_out:
        raise ValueError(f"top_k={top_k} must be in 1..d_vocab={model.cfg.d_vocab_out}.")
    next_tokens = tokens[:, 1:].to(model.W_U.device)
    top_tokens, top_probs, correct_probs, correct_ranks = [], [], [], []
    for resid in stack:  # one stage at a time keeps only one [batch, pos, d_vocab] alive
        log_probs = model.unembed(model.ln_final(resid.to(model.W_U))).float().log_softmax(-1)
        best = log_probs.topk(top_k, dim=-1)
        top_tokens.append(best.indices)
        top_probs.append(best.values.exp())
        correct = log_probs[:, :-1].gather(-1, next_tokens[..., None])  # [batch, pos - 1, 1]
        correct_probs.append(correct[..., 0].exp())
        correct_ranks.append((log_probs[:, :-1] > correct).sum(-1))
    return LogitLens(
        labels=labels,
        tokens=tokens,
        top_tokens=torch.stack(top_tokens),
        top_probs=torch.stack(top_probs),
        correct_probs=torch.stack(correct_probs),
        correct_ranks=torch.stack(correct_ranks),
        tokenizer=model.tokenizer,
    )
