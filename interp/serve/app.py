"""The dashboard's ASGI app: the page, its local scripts, and the JSON API (FastAPI; its
OpenAPI schema at ``/openapi.json``; FastAPI's ``/docs`` page is off, as it loads its
scripts from a CDN).

    GET  /                         the page (state in the URL's hash: model, prompt, layer, head)
    GET  /vendor/plotly-cartesian.min.js  plotly.js's cartesian bundle (interp/viz/static)
    GET  /vendor/attention.js      the canvas attention view the reports use too
                                   (assets gzip-compressed, with ETag and Cache-Control)
    GET  /api/models               the models served and their shapes
    POST /api/prompt               tokens and top next-token predictions
    POST /api/attention            a layer's attention patterns (or one head's)
    POST /api/logit_lens           the top prediction at every depth and position
    POST /api/attribution          direct logit attribution by layer and head
    POST /api/head_scores          previous-token, duplicate-token and induction scores
    POST /api/sae_features         the strongest SAE features per token (with --sae)
    GET  /sae/{model}/feature/{f}  one SAE feature's page (?prompt= adds its activations)
    GET  /graph, /graph/{slug}     the attribution-graph viewer (graphs.py)
    GET  /features, /api/features/..., POST /api/steer: the feature browser (features.py)
    POST /api/patching             start a patching job (202, its id)
    GET  /api/jobs/{id}            a job's progress and, when done, its result
    GET  /api/jobs/{id}/events     the same as a server-sent event stream
    DELETE /api/jobs/{id}          cancel a job

Example:
    >>> from fastapi.testclient import TestClient
    >>> app = create_app({"attn-only-2l": interp.load_model("attn-only-2l")})
    >>> # uvicorn.run(app, host="127.0.0.1", port=8000) serves it; here a test client asks
    >>> with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as client:
    ...     body = {"model": "attn-only-2l", "prompt": "1 2 3 1 2"}
    ...     reply = client.post("/api/prompt", json=body)
    >>> reply.status_code, reply.json()["tokens"], reply.json()["top_predictions"][0]["token"]
    (200, ['<|bos|>', '1', '2', '3', '1', '2'], '3')
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.middleware.gzip import GZipMiddleware

from interp.model import HookedTransformer
from interp.serve import analyses
from interp.serve.assets import LIBRARY_MAX_AGE, Asset
from interp.serve.auth import MAX_BODY, Guard
from interp.serve.errors import ApiError
from interp.serve.feature_index import FeatureIndex
from interp.serve.features import add_feature_routes
from interp.serve.graphs import add_graph_routes
from interp.serve.jobs import Jobs
from interp.serve.schemas import (
    MAX_PROMPT_CHARS,
    AttentionRequest,
    AttentionResponse,
    AttributionRequest,
    AttributionResponse,
    ErrorResponse,
    HeadScoresResponse,
    JobStatus,
    LogitLensResponse,
    ModelsResponse,
    PatchingRequest,
    PromptRequest,
    PromptResponse,
    SaeFeaturesResponse,
)
from interp.serve.worker import MAX_TOKENS, Workers
from interp.viz.report import STATIC as VIZ_STATIC

T = TypeVar("T")
WORKER_THREADS = 4
STATIC = resources.files("interp.serve") / "static"
STATIC_FILES = {
    "api.js": "text/javascript",
    "app.js": "text/javascript",
    "style.css": "text/css",
    "features.js": "text/javascript",
}
VENDOR_FILES = ("plotly-cartesian.min.js", "attention.js")  # from interp/viz/static
# The page runs only its own scripts; data reaches it as JSON and is written as text.
PAGE_HEADERS = {
    "content-security-policy": "default-src 'self'; script-src 'self'; style-src 'self' "
    "'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
ERRORS = {code: {"model": ErrorResponse} for code in (401, 403, 404, 413, 422, 429)}


def _validation_message(error: RequestValidationError) -> str:
    parts = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"] if part != "body") or "body"
        parts.append(f"{where}: {item['msg']}")
    return "Bad request: " + "; ".join(parts)


def create_app(
    models: dict[str, HookedTransformer],
    token: str | None = None,
    saes: dict[str, Any] | None = None,
    max_tokens: int = MAX_TOKENS,
    max_body: int = MAX_BODY,
    feature_indexes: dict[str, FeatureIndex] | None = None,
    graphs: dict[str, Any] | None = None,
) -> Guard:
    """The dashboard app serving ``models`` (by name; nothing else can be asked for), behind
    the token or loopback check (``interp.serve.auth.Guard``). ``saes`` maps a model name to
    an SAE whose features the page shows; ``feature_indexes`` (by model name, an
    ``interp.serve.feature_index.FeatureIndex``) its dataset statistics, for the feature
    browser at ``/features`` (``interp.serve.features``); ``graphs`` (by slug: a graph JSON,
    its path or an ``interp.viz.graph_view.GraphView``) the pages of ``/graph``.

    Example:
        >>> from fastapi.testclient import TestClient
        >>> app = create_app({"attn-only-2l": interp.load_model("attn-only-2l")}, token=None)
        >>> with TestClient(app) as stranger:   # not a loopback client: refused
        ...     stranger.get("/api/models").status_code
        403
        >>> with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5000)) as local:
        ...     [m["name"] for m in local.get("/api/models").json()["models"]]
        ['attn-only-2l']
    """
    workers = Workers(models, saes, max_tokens)
    jobs = Jobs()
    threads: list[ThreadPoolExecutor] = []  # the request threads, made at start-up

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        threads.append(ThreadPoolExecutor(WORKER_THREADS, thread_name_prefix="interp-serve"))
        yield
        jobs.shutdown()
        threads.pop().shutdown(wait=True)

    api = FastAPI(
        title="interp dashboard",
        description="Analyses of a prompt on the models this server was started with.",
        lifespan=lifespan,
        responses=ERRORS,
        docs_url=None,
        redoc_url=None,
    )
    api.state.workers, api.state.jobs = workers, jobs
    # JSON answers (a layer's patterns, a lens) cross the wire compressed; the assets come
    # compressed already (interp.serve.assets) and event streams are left as they are.
    api.add_middleware(GZipMiddleware, minimum_size=1024, compresslevel=5)

    async def in_worker(function: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(
            threads[0] if threads else None, function, *args
        )

    @api.exception_handler(ApiError)
    async def api_error(_: Request, error: ApiError) -> JSONResponse:
        return JSONResponse({"error": error.message}, status_code=error.status)

    @api.exception_handler(RequestValidationError)
    async def validation_error(_: Request, error: RequestValidationError) -> JSONResponse:
        return JSONResponse({"error": _validation_message(error)}, status_code=422)

    @api.get("/", include_in_schema=False)
    def page() -> Response:
        html = (STATIC / "index.html").read_text(encoding="utf-8")
        return Response(html, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    @api.get("/static/{name}", include_in_schema=False)
    def static(name: str, request: Request) -> Response:
        if name not in STATIC_FILES:  # a fixed list: no request path reaches the file system
            raise ApiError(404, f"no static file {name!r}.")
        path = Path(str(STATIC / name))
        return Asset.of(path, STATIC_FILES[name], max_age=0).response(request)

    @api.get("/vendor/{name}", include_in_schema=False)
    def vendor(name: str, request: Request) -> Response:
        if name not in VENDOR_FILES:  # a fixed list, as for /static
            raise ApiError(404, f"no vendor file {name!r}.")
        asset = Asset.of(VIZ_STATIC / name, "text/javascript", LIBRARY_MAX_AGE)
        return asset.response(request)

    add_feature_routes(api, workers, feature_indexes or {}, in_worker, PAGE_HEADERS)
    add_graph_routes(api, graphs or {}, PAGE_HEADERS)

    @api.get("/api/models", response_model=ModelsResponse)
    def list_models() -> dict[str, Any]:
        """The models this server serves, with their shapes and prompt limit."""
        return {
            "models": [
                {
                    "name": worker.name,
                    "n_layers": worker.model.cfg.n_layers,
                    "n_heads": worker.model.cfg.n_heads,
                    "d_model": worker.model.cfg.d_model,
                    "d_vocab": worker.model.cfg.d_vocab,
                    "n_ctx": worker.model.cfg.n_ctx,
                    "attn_only": worker.model.cfg.attn_only,
                    "max_tokens": worker.max_tokens,
                    "has_sae": worker.sae is not None,
                    "example_prompt": worker.example_prompt,
                    "example_corrupted": worker.example_corrupted,
                }
                for worker in workers
            ]
        }

    @api.post("/api/prompt", response_model=PromptResponse)
    async def prompt(body: PromptRequest) -> dict[str, Any]:
        """The prompt's tokens and the top next-token predictions after it."""
        return await in_worker(analyses.prompt_summary, workers[body.model], body.prompt)

    @api.post("/api/attention", response_model=AttentionResponse)
    async def attention(body: AttentionRequest) -> dict[str, Any]:
        """A layer's attention patterns [head, query, key], or one head's with ``head``."""
        worker = workers[body.model]
        return await in_worker(analyses.attention, worker, body.prompt, body.layer, body.head)

    @api.post("/api/logit_lens", response_model=LogitLensResponse)
    async def logit_lens(body: PromptRequest) -> dict[str, Any]:
        """The logit lens: the top prediction at every stage of the residual stream."""
        return await in_worker(analyses.lens, workers[body.model], body.prompt)

    @api.post("/api/attribution", response_model=AttributionResponse)
    async def attribution(body: AttributionRequest) -> dict[str, Any]:
        """Direct logit attribution of the answer (minus the wrong answer) by head and MLP."""
        worker = workers[body.model]
        args = (worker, body.prompt, body.answer, body.wrong_answer)
        return await in_worker(analyses.attribution, *args)

    @api.post("/api/head_scores", response_model=HeadScoresResponse)
    async def head_scores(body: PromptRequest) -> dict[str, Any]:
        """Previous-token, duplicate-token and induction scores of every head."""
        return await in_worker(analyses.scores, workers[body.model], body.prompt)

    @api.post("/api/sae_features", response_model=SaeFeaturesResponse)
    async def sae_features(body: PromptRequest) -> dict[str, Any]:
        """The strongest features of the model's SAE at each position."""
        return await in_worker(analyses.sae_features, workers[body.model], body.prompt)

    @api.get("/sae/{model}/feature/{feature}", include_in_schema=False)
    async def sae_feature_page(
        model: str,
        feature: int,
        prompt: str | None = Query(default=None, min_length=1, max_length=MAX_PROMPT_CHARS),
    ) -> Response:
        html = await in_worker(analyses.sae_feature_page, workers[model], feature, prompt)
        return Response(html, media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    @api.post("/api/patching", status_code=202, response_model=JobStatus)
    async def patching(body: PatchingRequest) -> dict[str, Any]:
        """Start activation patching (residual stream by layer x position, then head outputs
        by layer x head); follow it at ``/api/jobs/{id}``. Bad input fails here, not later."""
        worker = workers[body.model]
        args = (worker, body.prompt, body.corrupted, body.answer, body.wrong_answer)
        plan = await in_worker(analyses.PatchingPlan, *args)
        return jobs.start(plan.total, plan.run).status()

    @api.get("/api/jobs/{job_id}", response_model=JobStatus)
    def job_status(job_id: str) -> dict[str, Any]:
        """A job's state and progress; its result once done."""
        return jobs.get(job_id).status()

    @api.delete("/api/jobs/{job_id}", response_model=JobStatus)
    def cancel_job(job_id: str) -> dict[str, Any]:
        """Cancel a job; it stops after the step it is in."""
        job = jobs.get(job_id)
        job.cancel()
        return job.status()

    @api.get("/api/jobs/{job_id}/events", response_class=StreamingResponse)
    async def job_events(job_id: str, request: Request) -> StreamingResponse:
        """The job's status as server-sent events: one on every change, the last when it
        finishes."""
        job = jobs.get(job_id)

        async def events() -> AsyncIterator[str]:
            seen = -1
            while not await request.is_disconnected():
                if job.version != seen:
                    seen = job.version
                    yield f"data: {json.dumps(job.status())}\n\n"
                    if job.finished:
                        return
                await asyncio.sleep(0.05)

        return StreamingResponse(events(), media_type="text/event-stream")

    return Guard(api, token, max_body)
