"""Mining a token dataset for each feature's top-activating contexts and statistics
(density, L0, dead share, activation histogram), in memory that does not grow with the data.

Example:
    >>> model = interp.load_model("shakespeare-char")   # the SAE's model
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> from interp.sae.features import text_windows
    >>> from interp.training.text import default_text
    >>> text = default_text()[:3000]                     # tiny-shakespeare's first lines
    >>> stats = top_activations(model, sae, text_windows(model, text), k=5)
    >>> stats.contexts(7)[0]["value"]            # the strongest activation of feature 7
    2.0197
    >>> round(float(stats.density[7]), 3), stats.l0   # share of tokens it fires on; TopK's k
    (0.036, 16.0)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.sae.features.activations import feature_acts
from interp.sae.features.indices import checked_count, checked_index
from interp.sae.sae import SAE

HISTOGRAM_EDGES = torch.logspace(-3, 3, 61)  # log-spaced activation bins, 1e-3 .. 1e3


def _batches(
    data: Tensor | Iterable[Tensor], batch_size: int
) -> Iterable[Int[Tensor, "batch pos"]]:
    if isinstance(data, Tensor):
        if data.ndim != 2:
            raise ValueError(f"tokens must be [n_sequences, pos], got shape {tuple(data.shape)}.")
        yield from data.split(batch_size)
    else:
        yield from data


@dataclass
class FeatureStats:
    """Per-feature statistics over a token dataset (``top_activations``'s result).

    ``top_values [d_sae, k]`` descending (0 where a feature fired on fewer than ``k`` tokens,
    with ``top_sequence``/``top_position`` -1 there); ``context_tokens``/``context_acts``
    ``[d_sae, k, left + 1 + right]``: the tokens around each top token (-1 outside the
    sequence) and the feature's activation on them; ``fire_count`` and ``act_sum`` [d_sae];
    ``histogram [d_sae, 60]`` counts positive activations in ``HISTOGRAM_EDGES`` bins.
    """

    top_values: Float[Tensor, "d_sae k"]
    top_sequence: Int[Tensor, "d_sae k"]
    top_position: Int[Tensor, "d_sae k"]
    context_tokens: Int[Tensor, "d_sae k ctx"]
    context_acts: Float[Tensor, "d_sae k ctx"]
    left: int
    fire_count: Int[Tensor, " d_sae"]
    act_sum: Float[Tensor, " d_sae"]
    histogram: Int[Tensor, "d_sae bins"]
    n_tokens: int
    hook_name: str

    @property
    def density(self) -> Float[Tensor, " d_sae"]:
        """The fraction of tokens on which each feature is active."""
        return self.fire_count.double() / max(self.n_tokens, 1)

    @property
    def l0(self) -> float:
        """The mean number of active features a token."""
        return float(self.fire_count.sum()) / max(self.n_tokens, 1)

    @property
    def dead_fraction(self) -> float:
        """The share of features active on no token."""
        return float((self.fire_count == 0).double().mean())

    def most_active(self, n: int) -> list[int]:
        """The ``n`` features with the largest top activation (active ones only)."""
        n = checked_count(n, "n")
        order = self.top_values[:, 0].argsort(descending=True)
        return [int(f) for f in order[:n] if self.top_values[f, 0] > 0]

    def contexts(self, feature: int, tokenizer: Any = None) -> list[dict[str, Any]]:
        """Feature ``feature``'s top contexts, strongest first: each a dict with ``value``,
        ``sequence``, ``position``, ``tokens`` (ids, or strings with ``tokenizer``), ``acts``
        and ``index`` (the top token's place in ``tokens``).

        Example:
            >>> model = interp.load_model("shakespeare-char")   # the SAE's model
            >>> sae = interp.load_sae("shakespeare-char-resid-l1")
            >>> from interp.sae.features import text_windows
            >>> from interp.training.text import default_text
            >>> text = default_text()[:3000]                     # tiny-shakespeare's first lines
            >>> stats = top_activations(model, sae, text_windows(model, text), k=5)
            >>> context = stats.contexts(7, model.tokenizer)[0]
            >>> "".join(context["tokens"]), context["position"]
            (" we'll have corn at o", 74)
        """
        d_sae = self.top_values.shape[0]
        feature = checked_index(feature, d_sae, "feature", f"an SAE with d_sae={d_sae}")
        out = []
        for j in range(self.top_values.shape[1]):
            if self.top_position[feature, j] < 0:
                break
            ids = self.context_tokens[feature, j]
            keep = ids >= 0
            first = int(keep.nonzero()[0])
            tokens: list[Any] = ids[keep].tolist()
            if tokenizer is not None:
                tokens = [tokenizer.decode([t]) for t in tokens]
            out.append(
                {
                    "value": float(self.top_values[feature, j]),
                    "sequence": int(self.top_sequence[feature, j]),
                    "position": int(self.top_position[feature, j]),
                    "tokens": tokens,
                    "acts": self.context_acts[feature, j][keep].tolist(),
                    "index": self.left - first,
                }
            )
        return out


def _window(
    values: Tensor, rows: Tensor, positions: Tensor, offsets: Tensor, fill: float
) -> Tensor:
    """values[rows, positions + offsets] with ``fill`` outside [0, pos): [..., ctx]."""
    where = positions[..., None] + offsets  # [..., ctx]
    inside = (where >= 0) & (where < values.shape[1])
    picked = values[rows[..., None], where.clamp(0, values.shape[1] - 1)]
    return picked.masked_fill(~inside, fill)


@torch.no_grad()
def top_activations(
    model: Any,
    sae: SAE,
    data: Tensor | Iterable[Tensor],
    k: int = 20,
    batch_size: int = 32,
    left: int = 16,
    right: int = 4,
    progress: bool = False,
) -> FeatureStats:
    """Stream ``data`` (token windows [n, pos], or an iterable of [batch, pos] batches)
    through the model to the SAE's hook and keep, for every feature, its ``k`` strongest
    activations with ``left``/``right`` tokens of context, plus density and a histogram.

    Memory is O(k x d_sae x context), whatever the dataset's size: each batch's candidates
    are merged into the running top-k with one ``torch.topk``. ``progress`` shows a progress
    bar (tqdm, on stderr) over the batches.

    Example:
        >>> model = interp.load_model("shakespeare-char")   # the SAE's model
        >>> sae = interp.load_sae("shakespeare-char-resid-l1")
        >>> from interp.sae.features import text_windows
        >>> from interp.training.text import default_text
        >>> text = default_text()[:3000]                     # tiny-shakespeare's first lines
        >>> stats = top_activations(model, sae, text_windows(model, text), k=10)
        >>> round(float(stats.density[7]), 3), stats.l0
        (0.036, 16.0)
    """
    k = checked_count(k, "k", minimum=1)
    batch_size = checked_count(batch_size, "batch_size", minimum=1)
    left, right = checked_count(left, "left"), checked_count(right, "right")
    d_sae = sae.cfg.d_sae
    width = left + 1 + right
    offsets = torch.arange(-left, right + 1)
    values = torch.zeros(d_sae, k)
    sequence = torch.full((d_sae, k), -1, dtype=torch.long)
    position = torch.full((d_sae, k), -1, dtype=torch.long)
    context_tokens = torch.full((d_sae, k, width), -1, dtype=torch.long)
    context_acts = torch.zeros(d_sae, k, width)
    fire_count = torch.zeros(d_sae, dtype=torch.long)
    act_sum = torch.zeros(d_sae, dtype=torch.float64)
    histogram = torch.zeros(d_sae, len(HISTOGRAM_EDGES) - 1, dtype=torch.long)
    n_tokens = n_sequences = 0
    n_batches = -(-len(data) // batch_size) if isinstance(data, Tensor) else None
    batches = tqdm(
        _batches(data, batch_size),
        total=n_batches,
        desc=f"mining {sae.cfg.hook_name}",
        unit="batch",
        disable=not progress,
    )
    for tokens in batches:
        tokens = tokens.cpu()
        acts = feature_acts(model, sae, tokens).float().cpu()  # [batch, pos, d_sae]
        batch, n_pos = tokens.shape
        flat = acts.reshape(-1, d_sae)  # [batch * pos, d_sae]
        token_ids, feature_ids = (flat > 0).nonzero(as_tuple=True)
        fire_count += torch.bincount(feature_ids, minlength=d_sae)
        active_values = flat[token_ids, feature_ids]
        act_sum.index_add_(0, feature_ids, active_values.double())
        active_values = active_values.clamp(HISTOGRAM_EDGES[0], HISTOGRAM_EDGES[-1])
        n_bins = histogram.shape[1]
        bins = torch.bucketize(active_values, HISTOGRAM_EDGES).sub(1).clamp(0, n_bins - 1)
        histogram.view(-1).index_add_(0, feature_ids * n_bins + bins, torch.ones_like(bins))
        n_tokens += flat.shape[0]
        # candidates: each feature's k best tokens in this batch, [d_sae, kb]
        kb = min(k, flat.shape[0])
        batch_values, where = (t.T for t in flat.topk(kb, dim=0))
        rows, cols = where // n_pos, where % n_pos
        batch_context = _window(tokens, rows, cols, offsets, -1)  # [d_sae, kb, ctx]
        where_ctx = rows[..., None] * n_pos + (cols[..., None] + offsets).clamp(0, n_pos - 1)
        batch_acts = flat.T.gather(1, where_ctx.reshape(d_sae, -1)).reshape(d_sae, kb, width)
        batch_acts = batch_acts.masked_fill(batch_context < 0, 0.0)
        # merge with the running top-k
        merged = torch.cat([values, batch_values], dim=1)
        new_values, pick = merged.topk(k, dim=-1, sorted=True)
        positive = new_values > 0
        old = pick < k  # [d_sae, k]: from the running top-k, else from this batch
        pick = (pick.clamp(max=k - 1), (pick - k).clamp(min=0), old, positive)
        sequence = _choose(pick, sequence, rows + n_sequences, -1)
        position = _choose(pick, position, cols, -1)
        context_tokens = _choose(pick, context_tokens, batch_context, -1)
        context_acts = _choose(pick, context_acts, batch_acts, 0.0)
        values = new_values.masked_fill(~positive, 0.0)
        n_sequences += batch
    return FeatureStats(
        values,
        sequence,
        position,
        context_tokens,
        context_acts,
        left,
        fire_count,
        act_sum,
        histogram,
        n_tokens,
        sae.cfg.hook_name,
    )


def _choose(pick: tuple[Tensor, ...], running: Tensor, fresh: Tensor, fill: Any) -> Tensor:
    """The merged top-k's entries: ``running`` or ``fresh`` rows as ``pick`` says, ``fill``
    where the merged value is not positive."""
    from_running, from_fresh, old, positive = pick
    a = running.gather(1, _expand(from_running, running))
    b = fresh.gather(1, _expand(from_fresh, fresh))
    out = torch.where(_expand(old, running), a, b)
    return out.masked_fill(~_expand(positive, running), fill)


def _expand(index: Tensor, like: Tensor) -> Tensor:
    """``index`` [d_sae, k] broadcast to ``like``'s trailing axes: [d_sae, k, *like[2:]]
    (``like`` may have fewer than ``k`` columns: a batch of fewer tokens than ``k``)."""
    trailing = like.shape[2:]
    return index.reshape(*index.shape, *([1] * len(trailing))).expand(*index.shape, *trailing)
