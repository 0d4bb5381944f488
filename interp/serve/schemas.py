"""The JSON API's request and response bodies (pydantic models, so FastAPI validates them
and documents them in its OpenAPI schema at ``/openapi.json``).

Every request names a ``model`` (one of those the server was started with) and a ``prompt``;
the limits on text length are here, the limit in tokens is the server's (``max_tokens``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_PROMPT_CHARS = 4000  # characters; the server also bounds the prompt in tokens
MAX_NAME_CHARS = 200


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PromptRequest(_Request):
    """A model and a prompt: what every analysis of one prompt takes."""

    model: str = Field(min_length=1, max_length=MAX_NAME_CHARS, examples=["attn-only-2l"])
    prompt: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS, examples=["1 2 3 1 2"])


class AttentionRequest(PromptRequest):
    """One layer's attention patterns (every head), or one head's with ``head``."""

    layer: int = Field(ge=0, examples=[0])
    head: int | None = Field(default=None, ge=0)


class AttributionRequest(PromptRequest):
    """Direct logit attribution of ``answer`` (minus ``wrong_answer``) at the last position;
    each must be exactly one token (default answer: the model's top prediction)."""

    answer: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)
    wrong_answer: str | None = Field(default=None, min_length=1, max_length=MAX_NAME_CHARS)


class PatchingRequest(AttributionRequest):
    """Activation patching from ``prompt`` (clean) into ``corrupted`` (same length in tokens),
    on the logit difference ``answer - wrong_answer`` (defaults: the clean run's top
    prediction, and the corrupted run's top prediction other than it)."""

    corrupted: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class ErrorResponse(BaseModel):
    """Every 4xx/5xx answer: a message that names the bad value and the fix."""

    error: str


class ModelInfo(BaseModel):
    name: str
    n_layers: int
    n_heads: int
    d_model: int
    d_vocab: int
    n_ctx: int
    attn_only: bool
    max_tokens: int = Field(description="the longest prompt (in tokens, BOS included) served")
    has_sae: bool
    example_prompt: str = Field(description='a prompt the model reads ("" if none fits)')
    example_corrupted: str = Field(
        description="a corrupted version of it, the same length in tokens, for patching"
    )


class ModelsResponse(BaseModel):
    models: list[ModelInfo]


class Prediction(BaseModel):
    token: str
    token_id: int
    prob: float


class PromptResponse(BaseModel):
    model: str
    tokens: list[str]
    token_ids: list[int]
    top_predictions: list[Prediction] = Field(description="next-token predictions at the end")


class AttentionResponse(BaseModel):
    model: str
    tokens: list[str]
    layer: int
    head: int | None
    patterns: list[list[list[float]]] = Field(
        description="[head, query_pos, key_pos]; one head when `head` is given"
    )


class LogitLensResponse(BaseModel):
    model: str
    tokens: list[str]
    stages: list[str]
    top_tokens: list[list[str]] = Field(description="[stage][pos]: the top-1 prediction")
    top_probs: list[list[float]] = Field(description="[stage][pos]: its probability")


class AttributionResponse(BaseModel):
    model: str
    tokens: list[str]
    answer: str
    wrong_answer: str | None
    logit_diff: float
    heads: list[list[float]] = Field(description="[layer][head] direct effect")
    mlps: list[float] | None = Field(description="[layer]; null for attention-only models")
    other: dict[str, float] = Field(description="embeddings and biases")


class StrongHead(BaseModel):
    head: str = Field(examples=["L1H0"])
    score: float


class HeadScoresResponse(BaseModel):
    model: str
    tokens: list[str]
    scores: dict[str, list[list[float | None]]] = Field(
        description="{kind: [layer][head]}, kinds: previous token, duplicate token, induction; "
        "null where a score is undefined for the prompt"
    )
    strongest: dict[str, StrongHead | None] = Field(
        description="{kind: the best head scoring `threshold` or more}, null where none does; "
        "an induction head only in a layer after a previous-token head"
    )
    threshold: float


class SaeFeature(BaseModel):
    feature: int
    activation: float


class SaeFeaturesResponse(BaseModel):
    model: str
    tokens: list[str]
    hook: str
    features: list[list[SaeFeature]] = Field(description="[pos]: the strongest features")


class JobStatus(BaseModel):
    id: str
    state: Literal["running", "done", "cancelled", "error"]
    done: int = Field(description="steps finished")
    total: int
    error: str | None = None
    result: PatchingResult | None = None


class PatchingResult(BaseModel):
    tokens: list[str]
    corrupted_tokens: list[str]
    answer: str
    wrong_answer: str
    clean_logit_diff: float
    corrupted_logit_diff: float
    normalised: bool
    warning: str | None = Field(
        description="set when the clean and corrupted logit differences are too close "
        "(under interp.viz.report_data.MIN_PATCHING_GAP) to normalise by"
    )
    resid_pre: list[list[float]] = Field(description="[layer][pos]")
    heads: list[list[float]] = Field(description="[layer][head], head outputs at all positions")


JobStatus.model_rebuild()
