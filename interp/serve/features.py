"""The feature browser's page and API (with ``--sae``; dataset statistics with ``--data``):

    GET  /features                        the page (state in the URL's hash)
    GET  /api/features/{model}            the SAE, the dataset, L0 and dead share
    GET  /api/features/{model}/{f}        a feature: density, histogram, top contexts,
                                          logit weights (``?prompt=``: its activations there)
    POST /api/features/search             features by id, by a token they promote, or by
                                          text in their top contexts
    POST /api/features/token              the strongest features on one token of a prompt
    POST /api/features/prompt             a prompt's tokens, predictions, strongest features
    POST /api/steer                       logits and a greedy continuation, with and without
                                          edits (``interp.serve.steering``)

Example:
    >>> from fastapi.testclient import TestClient
    >>> from interp.serve import create_app
    >>> chars = interp.load_model("shakespeare-char")
    >>> sae = interp.load_sae("shakespeare-char-resid-l1")
    >>> app = create_app({"shakespeare-char": chars}, saes={"shakespeare-char": sae})
    >>> with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as client:
    ...     client.get("/api/features/shakespeare-char").json()
    {'model': 'shakespeare-char', 'hook': 'blocks.1.hook_resid_post', 'd_sae': 1024}
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from typing import Any, Literal

import torch
from fastapi import FastAPI, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from interp.serve.errors import ApiError
from interp.serve.feature_index import FeatureIndex
from interp.serve.schemas import MAX_PROMPT_CHARS
from interp.serve.steering import Edit, greedy
from interp.serve.worker import ModelWorker, Workers

TOKEN_FEATURES = 10  # features listed for a clicked token
SEARCH_RESULTS = 20
LOGITS = 10
MAX_NEW_TOKENS = 40
Prompt = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str = Field(max_length=200)


class SearchRequest(_Body):
    query: str = Field(min_length=1, max_length=200)
    by: Literal["id", "token", "text"] = "text"


class TokenRequest(_Body):
    prompt: str = Prompt
    position: int


class PromptFeaturesRequest(_Body):
    prompt: str = Prompt
    feature: int | None = None


class EditRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    target: Literal["feature", "neuron", "direction"]
    mode: Literal["add", "clamp", "ablate"]
    value: float = Field(default=0.0, allow_inf_nan=False)
    feature: int | None = None
    layer: int | None = None
    neuron: int | None = None
    hook_name: str | None = Field(default=None, max_length=200)
    direction: list[float] | None = Field(default=None, max_length=65536)
    direction_token: str | None = Field(default=None, max_length=200)


class SteerRequest(_Body):
    prompt: str = Prompt
    edits: list[EditRequest] = Field(min_length=1, max_length=8)
    n_new: int = Field(default=10, ge=0, le=MAX_NEW_TOKENS)


def _sae(worker: ModelWorker) -> Any:
    if worker.sae is None:
        raise ApiError(404, f"No SAE is loaded for {worker.name}; start the server with --sae.")
    return worker.sae


def _index(indexes: dict[str, FeatureIndex], worker: ModelWorker) -> FeatureIndex:
    _sae(worker)
    if worker.name not in indexes:
        raise ApiError(
            404,
            f"No dataset statistics for {worker.name}'s SAE; start the server with "
            "--sae NAME --data FILE.",
        )
    return indexes[worker.name]


def _checked_feature(worker: ModelWorker, feature: int) -> int:
    d_sae = _sae(worker).cfg.d_sae
    if not 0 <= feature < d_sae:
        raise ApiError(
            422, f"Feature {feature} is out of range: {worker.name}'s SAE has 0 to {d_sae - 1}."
        )
    return feature


def _prompt_acts(worker: ModelWorker, prompt: str) -> tuple[Any, torch.Tensor]:
    """The prompt's cached forward and its SAE activations [pos, d_sae]."""
    sae = _sae(worker)
    entry = worker.forward(prompt)
    with torch.no_grad():
        acts = sae.encode(entry.cache[sae.cfg.hook_name][0].to(sae.dtype), hooked=False)
    return entry, acts.float().cpu()


def _token_list(worker: ModelWorker, ids: Any) -> list[str]:
    return [worker.model.tokenizer.token_str(int(i)) for i in ids]


def info(worker: ModelWorker, indexes: dict[str, FeatureIndex]) -> dict[str, Any]:
    sae = _sae(worker)
    index = indexes.get(worker.name)
    out = {"model": worker.name, "hook": sae.cfg.hook_name, "d_sae": sae.cfg.d_sae}
    if index is not None:
        stats = index.stats
        out |= {
            "data": index.data_name,
            "n_tokens": stats.n_tokens,
            "l0": stats.l0,
            "dead_fraction": stats.dead_fraction,
            "from_cache": index.from_cache,
        }
    return out


def feature(
    worker: ModelWorker, indexes: dict[str, FeatureIndex], f: int, prompt: str | None
) -> dict[str, Any]:
    """A feature's logit weights, and its dataset statistics and top contexts (with
    ``--data``), and its activations on ``prompt``."""
    from interp.sae.features import HISTOGRAM_EDGES, top_logits

    sae = _sae(worker)
    f = _checked_feature(worker, f)
    index = indexes.get(worker.name)
    if index is not None:  # stored at start-up
        logits = {
            kind: list(zip(_token_list(worker, ids[f]), weights[f].tolist(), strict=True))
            for kind, ids, weights in (
                ("promoted", index.promoted, index.promoted_weights),
                ("suppressed", index.suppressed, index.suppressed_weights),
            )
        }
    else:
        with torch.no_grad():
            logits = top_logits(worker.model, sae, f, min(LOGITS, worker.model.cfg.d_vocab))
    out: dict[str, Any] = {
        "model": worker.name,
        "feature": f,
        "hook": sae.cfg.hook_name,
        "promoted": [{"token": t, "weight": w} for t, w in logits["promoted"]],
        "suppressed": [{"token": t, "weight": w} for t, w in logits["suppressed"]],
    }
    if index is not None:
        stats = index.stats
        fires = int(stats.fire_count[f])
        out["dataset"] = {
            "data": index.data_name,
            "n_tokens": stats.n_tokens,
            "density": float(stats.density[f]),
            "mean_active": float(stats.act_sum[f]) / max(fires, 1),
            "max": float(stats.top_values[f, 0]),
            "histogram": {
                "edges": HISTOGRAM_EDGES.tolist(),
                "counts": stats.histogram[f].tolist(),
            },
            "contexts": [
                {
                    "value": c["value"],
                    "tokens": _token_list(worker, c["tokens"]),
                    "acts": [round(a, 4) for a in c["acts"]],
                    "index": c["index"],
                }
                for c in stats.contexts(f)
            ],
        }
    if prompt is not None:
        entry, acts = _prompt_acts(worker, prompt)
        out["prompt"] = {"tokens": entry.str_tokens, "acts": acts[:, f].tolist()}
    return out


def _summary(worker: ModelWorker, index: FeatureIndex, f: int) -> dict[str, Any]:
    stats = index.stats
    return {
        "feature": f,
        "density": float(stats.density[f]),
        "max": float(stats.top_values[f, 0]),
        "promotes": _token_list(worker, index.promoted[f, :5]),
    }


def search(
    worker: ModelWorker, indexes: dict[str, FeatureIndex], query: str, by: str
) -> dict[str, Any]:
    """Up to ``SEARCH_RESULTS`` features: the one numbered ``query`` (by id); those among
    whose most promoted tokens the token ``query`` is, highest rank first (by token); those
    whose top contexts contain ``query``, any case, strongest first (by text)."""
    index = _index(indexes, worker)
    if by == "id":
        try:
            found = [_checked_feature(worker, int(query))]
        except ValueError as error:
            raise ApiError(422, f"{query!r} is not a feature number.") from error
    elif by == "token":
        token = worker.single_token(query, "token")
        rank = (index.promoted == token).int().argmax(dim=1)  # [d_sae]
        has = (index.promoted == token).any(dim=1)
        order = sorted(has.nonzero()[:, 0].tolist(), key=lambda f: (int(rank[f]), f))
        found = order[:SEARCH_RESULTS]
    else:
        needle = query.lower()
        hits = [f for f, text in enumerate(index.context_text) if needle in text]
        top = index.stats.top_values[:, 0]
        found = sorted(hits, key=lambda f: -float(top[f]))[:SEARCH_RESULTS]
    return {
        "model": worker.name,
        "query": query,
        "by": by,
        "results": [_summary(worker, index, f) for f in found],
    }


def token_features(worker: ModelWorker, prompt: str, position: int) -> dict[str, Any]:
    """The ``TOKEN_FEATURES`` strongest active features at ``position`` of ``prompt``."""
    entry, acts = _prompt_acts(worker, prompt)
    n_pos = acts.shape[0]
    if not -n_pos <= position < n_pos:
        raise ApiError(422, f"position {position} is out of range: the prompt has {n_pos} tokens.")
    values, ids = acts[position].topk(min(TOKEN_FEATURES, acts.shape[1]))
    return {
        "model": worker.name,
        "position": position % n_pos,
        "token": entry.str_tokens[position],
        "features": [
            {"feature": int(i), "activation": float(v)}
            for v, i in zip(values, ids, strict=True)
            if v > 0
        ],
    }


def prompt_features(worker: ModelWorker, prompt: str, f: int | None) -> dict[str, Any]:
    """A prompt's tokens, top predictions, its strongest features (by their largest
    activation on it) and, given ``f``, that feature's activation on each token."""
    entry, acts = _prompt_acts(worker, prompt)
    probs = entry.last_logits.softmax(-1)
    top_probs, top_ids = probs.topk(min(5, probs.shape[0]))
    peaks = acts.max(dim=0).values  # [d_sae]
    values, ids = peaks.topk(min(TOKEN_FEATURES, peaks.shape[0]))
    out = {
        "model": worker.name,
        "tokens": entry.str_tokens,
        "predictions": [
            {"token": t, "prob": float(p)}
            for t, p in zip(_token_list(worker, top_ids), top_probs, strict=True)
        ],
        "features": [
            {"feature": int(i), "max": float(v)} for v, i in zip(values, ids, strict=True) if v > 0
        ],
    }
    if f is not None:
        out["acts"] = acts[:, _checked_feature(worker, f)].tolist()
    return out


def edit_of(worker: ModelWorker, request: EditRequest) -> Edit:
    """The ``Edit`` a request asks for; ``direction_token`` is the unembedding column of
    that one token (the direction that raises its logit)."""
    direction = request.direction
    if request.target == "direction" and direction is None and request.direction_token:
        token = worker.single_token(request.direction_token, "direction token")
        direction = worker.model.W_U[:, token].detach().double().cpu().tolist()
    return Edit(
        request.target,
        request.mode,
        request.value,
        request.feature,
        request.layer,
        request.neuron,
        request.hook_name,
        tuple(direction) if direction is not None else None,
    )


def _top(worker: ModelWorker, logits: torch.Tensor) -> list[dict[str, Any]]:
    probs = logits.softmax(-1)
    values, ids = logits.topk(min(LOGITS, logits.shape[0]))
    return [
        {
            "token": worker.model.tokenizer.token_str(int(i)),
            "token_id": int(i),
            "logit": float(v),
            "prob": float(probs[i]),
        }
        for v, i in zip(values, ids, strict=True)
    ]


def steer(worker: ModelWorker, body: SteerRequest) -> dict[str, Any]:
    """The next-token logits and a greedy continuation of ``n_new`` tokens, unchanged and
    with every edit's hook on (at every position)."""
    tokens = worker.tokenize(body.prompt)
    hooks = [edit_of(worker, e).hook(worker.model, worker.sae) for e in body.edits]
    with worker.lock:
        base_logits, base_new = greedy(worker.model, tokens, [], body.n_new)
        steered_logits, steered_new = greedy(worker.model, tokens, hooks, body.n_new)
    if not torch.isfinite(steered_logits).all():  # e.g. a clamp of 1e30 overflows float32
        values = ", ".join(f"{e.mode} {e.value:g}" for e in body.edits if e.mode != "ablate")
        raise ApiError(
            422,
            f"Steering with {values or 'these edits'} makes the logits non-finite (the "
            f"activations overflow {worker.model.cfg.dtype}); use a smaller value, e.g. within "
            "a few times the feature's top activation.",
        )
    decode = worker.model.tokenizer.decode
    diff = steered_logits - base_logits
    moved = diff.abs().topk(min(LOGITS, diff.shape[0])).indices
    return {
        "model": worker.name,
        "tokens": worker.model.to_str_tokens(tokens),
        "baseline": {"top": _top(worker, base_logits), "continuation": decode(base_new)},
        "steered": {"top": _top(worker, steered_logits), "continuation": decode(steered_new)},
        "moved": [
            {
                "token": worker.model.tokenizer.token_str(int(i)),
                "token_id": int(i),
                "baseline": float(base_logits[i]),
                "steered": float(steered_logits[i]),
            }
            for i in moved
        ],
    }


def add_feature_routes(
    api: FastAPI,
    workers: Workers,
    indexes: dict[str, FeatureIndex],
    in_worker: Callable[..., Any],
    page_headers: dict[str, str],
) -> None:
    """Register the feature browser's page and routes on ``api``."""
    page_file = resources.files("interp.serve") / "static" / "features.html"

    @api.get("/features", include_in_schema=False)
    def features_page() -> Response:
        html = page_file.read_text(encoding="utf-8")
        return Response(html, media_type="text/html; charset=utf-8", headers=page_headers)

    @api.get("/api/features/{model}")
    async def feature_info(model: str) -> dict[str, Any]:
        """The model's SAE and, with ``--data``, its dataset's token count, L0, dead share."""
        return info(workers[model], indexes)

    @api.get("/api/features/{model}/{f}")
    async def feature_detail(
        model: str,
        f: int,
        prompt: str | None = Query(default=None, min_length=1, max_length=MAX_PROMPT_CHARS),
    ) -> dict[str, Any]:
        """One feature: logit weights; density, histogram and top contexts (``--data``)."""
        return await in_worker(feature, workers[model], indexes, f, prompt)

    @api.post("/api/features/search")
    async def feature_search(body: SearchRequest) -> dict[str, Any]:
        """Features by id, by a token among those they promote most, or by context text."""
        return await in_worker(search, workers[body.model], indexes, body.query, body.by)

    @api.post("/api/features/token")
    async def features_on_token(body: TokenRequest) -> dict[str, Any]:
        """The strongest features on one token of the prompt."""
        return await in_worker(token_features, workers[body.model], body.prompt, body.position)

    @api.post("/api/features/prompt")
    async def features_on_prompt(body: PromptFeaturesRequest) -> dict[str, Any]:
        """A prompt's tokens, predictions and strongest features (and one feature's acts)."""
        return await in_worker(prompt_features, workers[body.model], body.prompt, body.feature)

    @api.post("/api/steer")
    async def steer_route(body: SteerRequest) -> dict[str, Any]:
        """Logits and a greedy continuation with and without the edits' hooks."""
        return await in_worker(steer, workers[body.model], body)
