"""What an SAE's features do: top-activating contexts, density, logit weights, DLA,
attribution (activation x gradient) and exact feature patching.

Feature activations are read by caching the SAE's input hook (the forward stops there) and
encoding it, so mining a dataset never runs the layers after the SAE. Exact feature
patching uses ``interp.patching``'s batched engine: with the error term, changing feature
``f`` at position ``p`` by ``d`` adds ``d * W_dec[f]`` to the SAE's output hook at ``p``,
which is an ordinary activation patch.

Example:
    >>> model = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> stats = top_activations(model, sae, text_windows(model, text), k=20)
    >>> stats.contexts(7)[0]            # the strongest context of feature 7
    >>> feature_logit_weights(model, sae)[7].topk(10)   # the characters feature 7 promotes
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.sae.sae import SAE
from interp.sae.splice import HookedSAETransformer
from interp.utils import get_act_name

HISTOGRAM_EDGES = torch.logspace(-3, 3, 61)  # log-spaced activation bins, 1e-3 .. 1e3


# --------------------------------------------------------------------------------- data
def text_windows(
    model: Any, text: str, seq_len: int | None = None
) -> Int[Tensor, "n_windows seq_len"]:
    """``text`` tokenized and cut into non-overlapping windows of ``seq_len`` tokens
    (default ``n_ctx``); each window starts with BOS when the model prepends one.

    Example:
        >>> text_windows(interp.load_model("shakespeare-char"), "ROMEO:\\n" * 100, 64).shape
        torch.Size([10, 64])
    """
    seq_len = seq_len or model.cfg.n_ctx
    bos = bool(model.cfg.default_prepend_bos) and model.tokenizer.bos_token_id is not None
    tokens = model.to_tokens(text, prepend_bos=False, truncate=False)[0].cpu()
    width = seq_len - int(bos)
    if width < 1 or len(tokens) < width:
        raise ValueError(
            f"The text is {len(tokens)} tokens; windows of {seq_len} need at least {width}."
        )
    windows = tokens[: len(tokens) // width * width].view(-1, width)
    if bos:
        column = torch.full((len(windows), 1), model.tokenizer.bos_token_id, dtype=tokens.dtype)
        windows = torch.cat([column, windows], dim=1)
    return windows


def _batches(
    data: Tensor | Iterable[Tensor], batch_size: int
) -> Iterable[Int[Tensor, "batch pos"]]:
    if isinstance(data, Tensor):
        if data.ndim != 2:
            raise ValueError(f"tokens must be [n_sequences, pos], got shape {tuple(data.shape)}.")
        yield from data.split(batch_size)
    else:
        yield from data


@torch.no_grad()
def feature_acts(
    model: Any, sae: SAE, tokens: Int[Tensor, "batch pos"]
) -> Float[Tensor, "batch pos d_sae"]:
    """The SAE's feature activations on ``tokens`` (the forward stops at its input hook).

    Example:
        >>> feature_acts(model, sae, model.to_tokens("ROMEO:"))[0, -1].topk(5)
    """
    hook = sae.cfg.hook_name
    _, cache = model.run_with_cache(tokens.to(model.device), names_filter=[hook], return_type=None)
    return sae.encode(cache[hook])


# -------------------------------------------------------------------- top activations
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
        order = self.top_values[:, 0].argsort(descending=True)
        return [int(f) for f in order[:n] if self.top_values[f, 0] > 0]

    def contexts(self, feature: int, tokenizer: Any = None) -> list[dict[str, Any]]:
        """Feature ``feature``'s top contexts, strongest first: each a dict with ``value``,
        ``sequence``, ``position``, ``tokens`` (ids, or strings with ``tokenizer``), ``acts``
        and ``index`` (the top token's place in ``tokens``).

        Example:
            >>> stats.contexts(7, model.tokenizer)[0]["tokens"]
        """
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
) -> FeatureStats:
    """Stream ``data`` (token windows [n, pos], or an iterable of [batch, pos] batches)
    through the model to the SAE's hook and keep, for every feature, its ``k`` strongest
    activations with ``left``/``right`` tokens of context, plus density and a histogram.

    Memory is O(k x d_sae x context), whatever the dataset's size: each batch's candidates
    are merged into the running top-k with one ``torch.topk``.

    Example:
        >>> stats = top_activations(model, sae, text_windows(model, text), k=10)
        >>> stats.density[7], stats.l0
    """
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
    for tokens in _batches(data, batch_size):
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
    """``index`` [d_sae, k] broadcast to ``like``'s trailing axes."""
    return index.reshape(*index.shape, *([1] * (like.ndim - 2))).expand_as(like)


# ----------------------------------------------------------------- output directions
def feature_directions(model: Any, sae: SAE) -> Float[Tensor, "d_sae d_model"]:
    """Each feature's decoder direction as written into the residual stream: ``W_dec`` for
    SAEs on d_model-wide hooks (resid, attn_out, mlp_out), through ``W_O`` for ``hook_z``.

    Example:
        >>> feature_directions(model, sae).shape
        torch.Size([1024, 128])
    """
    W_dec = _decoder(sae).detach()
    hook = sae.cfg.output_hook
    layer = sae.cfg.hook_layer
    if hook.endswith("attn.hook_z") and layer is not None:
        W_O = model.blocks[layer].attn.W_O.detach()  # [n_heads, d_head, d_model]
        return torch.einsum("fhd,hdm->fm", W_dec.view(len(W_dec), *W_O.shape[:2]), W_O.to(W_dec))
    if W_dec.shape[-1] != model.cfg.d_model:
        raise ValueError(
            f"{sae!r} writes {W_dec.shape[-1]} wide at {hook!r}; logit weights and DLA need an "
            f"SAE whose output joins the residual stream (d_model={model.cfg.d_model}: resid, "
            "attn_out, mlp_out) or reads attn.hook_z."
        )
    return W_dec.to(model.W_U.dtype)


def _through_final_norm(model: Any, directions: Tensor) -> Tensor:
    """Directions through ``ln_final``'s linear part: centred (LayerNorm) and times its
    weight; the position-dependent scale is left out (or applied by the caller)."""
    norm = model.ln_final
    if model.cfg.normalization_type in ("LN", "LNPre"):
        directions = directions - directions.mean(-1, keepdim=True)
    weight = getattr(norm, "w", None)
    return directions * weight.detach() if weight is not None else directions


def feature_logit_weights(model: Any, sae: SAE) -> Float[Tensor, "d_sae d_vocab"]:
    """Each feature's direct effect on the logits per unit of activation: its residual
    direction through ``ln_final`` (centring and weight; not the scale) and ``W_U``.

    Example:
        >>> weights = feature_logit_weights(model, sae)[7]
        >>> model.to_str_tokens(weights.topk(5).indices)   # the tokens feature 7 promotes
    """
    directions = _through_final_norm(model, feature_directions(model, sae))
    return directions @ model.W_U.detach()


def top_logits(
    model: Any, sae: SAE, feature: int, k: int = 10, weights: Tensor | None = None
) -> dict[str, list[tuple[str, float]]]:
    """The ``k`` tokens feature ``feature`` promotes and suppresses most, with weights.

    Example:
        >>> top_logits(model, sae, 7)["promoted"][:3]
    """
    row = (feature_logit_weights(model, sae) if weights is None else weights)[feature]
    up, down = row.topk(k), row.topk(k, largest=False)
    name = model.tokenizer.decode
    return {
        "promoted": [
            (name([int(i)]), float(v)) for v, i in zip(up.values, up.indices, strict=True)
        ],
        "suppressed": [
            (name([int(i)]), float(v)) for v, i in zip(down.values, down.indices, strict=True)
        ],
    }


@torch.no_grad()
def feature_dla(
    model: Any,
    sae: SAE,
    tokens: Int[Tensor, "1 pos"],
    answer: int,
    wrong_answer: int | None = None,
    position: int = -1,
) -> Float[Tensor, " d_sae"]:
    """Each feature's direct logit attribution at ``position``: activation x its direction
    through ``ln_final`` (with the run's own scale) x the unembedding of ``answer`` (minus
    ``wrong_answer``'s). With the error term and ``b_dec``, the features' DLAs sum to the
    SAE hook's own DLA.

    Example:
        >>> dla = feature_dla(model, sae, model.to_tokens("ROMEO"), model.to_single_token("\\n"))
        >>> dla.topk(5)
    """
    tokens = tokens.to(model.device)
    hook = sae.cfg.hook_name
    _, cache = model.run_with_cache(tokens, names_filter=[hook, "ln_final.hook_scale"])
    acts = sae.encode(cache[hook])[0, position]  # [d_sae]
    unembed = model.W_U[:, answer]
    if wrong_answer is not None:
        unembed = unembed - model.W_U[:, wrong_answer]
    scale = cache["ln_final.hook_scale"][0, position] if "ln_final.hook_scale" in cache else 1.0
    directions = _through_final_norm(model, feature_directions(model, sae)) / scale
    return acts.to(directions) * (directions @ unembed)


# -------------------------------------------------------------- attribution, patching
def _decoder(sae: SAE) -> Float[Tensor, "d_sae d_out"]:
    """The rows a unit change of each feature adds at the output hook."""
    W_dec = sae.W_dec
    if sae.cfg.activation == "topk" and sae.cfg.rescale_acts_by_decoder_norm:
        W_dec = W_dec / W_dec.norm(dim=-1, keepdim=True)
    return W_dec


def feature_attribution(
    model: Any,
    saes: SAE | Sequence[SAE],
    tokens: Int[Tensor, "batch pos"],
    metric: Callable[[Tensor], Tensor],
) -> dict[str, tuple[Tensor, Tensor]]:
    """Activation x gradient of ``metric(logits)`` for every feature of every SAE, from one
    forward and one backward pass of the model: feature ``f`` of an SAE spliced with its
    error term adds ``act_f * W_dec[f]`` at its output hook, so its attribution is
    ``act_f * (d metric / d output) . W_dec[f]``, the linear estimate of
    ``metric(clean) - metric(feature zeroed)`` that ``feature_patch`` computes exactly.

    Returns ``{hook_name: (attribution, activations)}``, each [batch, pos, d_sae].

    Example:
        >>> attr, acts = feature_attribution(model, [sae], tokens,
        ...     lambda logits: logits[0, -1, answer])[sae.cfg.hook_name]
        >>> attr[0].flatten().topk(10)
    """
    saes = [saes] if isinstance(saes, SAE) else list(saes)
    outputs = {sae.cfg.output_hook for sae in saes}
    inputs = {sae.cfg.hook_name for sae in saes}
    deltas: dict[str, Tensor] = {}
    seen: dict[str, Tensor] = {}

    def hook(activation: Tensor, hook: Any) -> Tensor:
        seen[hook.name] = activation.detach()
        if hook.name not in outputs:
            return activation
        deltas[hook.name] = torch.zeros_like(activation, requires_grad=True)
        return activation + deltas[hook.name]

    with torch.enable_grad():
        logits = model.run_with_hooks(tokens, fwd_hooks=[(n, hook) for n in outputs | inputs])
        value = metric(logits)
        if value.numel() != 1:
            raise ValueError(f"The metric must return one number; got shape {tuple(value.shape)}.")
        names = sorted(deltas)
        grads = torch.autograd.grad(value.sum(), [deltas[n] for n in names])
        grads = dict(zip(names, grads, strict=True))
    result = {}
    with torch.no_grad():
        for sae in saes:
            acts = sae.encode(seen[sae.cfg.hook_name])
            grad = grads[sae.cfg.output_hook].flatten(2).to(acts)  # [batch, pos, d_out]
            result[sae.cfg.hook_name] = (acts * (grad @ _decoder(sae).T), acts)
    return result


def _short_hook(hook: str, layer: int | None) -> str | None:
    """The ``get_act_name`` alias of ``hook`` (``blocks.1.hook_resid_post`` -> resid_post)."""
    if layer is None:
        return None
    short = hook.rsplit(".", 1)[-1].removeprefix("hook_")
    return short if get_act_name(short, layer) == hook else None


@torch.no_grad()
def feature_patch(
    model: Any,
    sae: SAE,
    tokens: Int[Tensor, "batch pos"],
    metric: Callable[[Tensor], Tensor],
    index: Sequence[tuple[int, int]] | Int[Tensor, "n 2"],
    values: Float[Tensor, "batch pos d_sae"] | None = None,
    max_batch_size: int = 64,
) -> Float[Tensor, " n"]:
    """Exact feature patching: ``metric`` after setting feature ``f`` at position ``p`` (each
    row ``(p, f)`` of ``index``, one run a row) to ``values[:, p, f]`` (default 0: ablation),
    with the SAE spliced with its error term; runs are batched by ``interp.patching``.

    Example:
        >>> ablated = feature_patch(model, sae, tokens, metric, [(5, 7), (5, 9)])
    """
    index = torch.as_tensor(index, dtype=torch.long).reshape(-1, 2)
    tokens = tokens.to(model.device)
    hook_in, hook_out = sae.cfg.hook_name, sae.cfg.output_hook
    _, cache = model.run_with_cache(tokens, names_filter=sorted({hook_in, hook_out}))
    acts = sae.encode(cache[hook_in])  # [batch, pos, d_sae]
    target = torch.zeros_like(acts) if values is None else values.to(acts)
    W_dec = _decoder(sae)
    corrupted = cache[hook_out]
    out_shape = corrupted.shape[2:]  # [d_model] or [n_heads, d_head]

    def setter(activation: Tensor, idx: Sequence[int], _: Tensor) -> Tensor:
        _, pos, feature = idx
        change = target[:, pos, feature] - acts[:, pos, feature]  # [batch]
        delta = change[:, None] * W_dec[feature]  # [batch, d_out]
        activation[:, pos] += delta.view(-1, *out_shape).to(activation)
        return activation

    short = _short_hook(hook_out, sae.cfg.hook_layer)
    if short is None or isinstance(model, HookedSAETransformer) and model.acts_to_saes:
        runs = [_patch_alone(model, tokens, metric, hook_out, setter, r) for r in index.tolist()]
        return torch.stack(runs)
    from interp.patching import generic_activation_patch

    rows = torch.cat([torch.full((len(index), 1), sae.cfg.hook_layer), index], dim=1)
    result = generic_activation_patch(
        model,
        tokens,
        {hook_out: corrupted},
        metric,
        setter,
        short,
        index_df=rows,
        max_batch_size=max_batch_size,
        progress=False,
    )
    return torch.as_tensor(result).reshape(-1)


def _patch_alone(model, tokens, metric, hook, setter, row) -> Tensor:  # noqa: ANN001
    """One patched run: a full forward with a hook adding the feature's change."""

    def patch(activation: Tensor, hook_point: Any) -> Tensor:
        return setter(activation, (None, *row), activation)

    logits = model.run_with_hooks(tokens, fwd_hooks=[(hook, patch)])
    return torch.as_tensor(metric(logits)).reshape(())


def spearman(a: Tensor, b: Tensor) -> float:
    """Spearman rank correlation of two 1-D tensors (average ranks for ties).

    Example:
        >>> spearman(torch.tensor([1., 2, 3]), torch.tensor([1., 5, 9]))
        1.0
    """

    def ranks(x: Tensor) -> Tensor:
        x = x.double().flatten()
        order = x.argsort()
        r = torch.empty_like(x)
        r[order] = torch.arange(len(x), dtype=torch.float64)
        for value in x.unique():  # ties: the mean rank
            tied = x == value
            r[tied] = r[tied].mean()
        return r

    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    return float((ra * rb).sum() / (ra.norm() * rb.norm()))
