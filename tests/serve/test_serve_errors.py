"""Every bad request to the dashboard's API is a 4xx JSON answer naming the bad value (never a
bare 500), and the server keeps serving after each; the answers it gives to trust a result:
each model's example prompts and the patching result's ill-conditioning warning."""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

import interp
from interp.serve import create_app
from interp.serve.examples import SYMBOLS
from interp.viz.report_data import MIN_PATCHING_GAP

LOCAL = {"base_url": "http://127.0.0.1", "client": ("127.0.0.1", 50000)}
ATTN, CHAR = "attn-only-2l", "shakespeare-char"
NOT_A_SYMBOL = "'e' is not a symbol of this model"


@pytest.fixture(scope="module")
def client():
    models = {name: interp.load_model(name) for name in (ATTN, CHAR)}
    # raise_server_exceptions=False: a bug would come back as the 500 a browser sees.
    with TestClient(create_app(models), raise_server_exceptions=False, **LOCAL) as client:
        yield client


def assert_serving(client):
    response = client.post("/api/attribution", json={"model": ATTN, "prompt": "1 2 3"})
    assert response.status_code == 200 and response.json()["answer"]


def wait_for(client, job_id):
    deadline = time.monotonic() + 60
    while (status := client.get(f"/api/jobs/{job_id}").json())["state"] == "running":
        assert time.monotonic() < deadline, status
        time.sleep(0.02)
    return status


ATTRIBUTION = {"model": ATTN, "prompt": "1 2 3"}
PATCHING = {"model": ATTN, "prompt": "1 2 3", "corrupted": "1 2 4"}
BAD = [
    (
        "attribution",
        ATTRIBUTION | {"answer": "e"},
        422,
        f"The answer 'e' cannot be tokenized by attn-only-2l: {NOT_A_SYMBOL}",
    ),
    (
        "attribution",
        ATTRIBUTION | {"wrong_answer": "e"},
        422,
        f"The wrong answer 'e' cannot be tokenized by attn-only-2l: {NOT_A_SYMBOL}",
    ),
    (
        "attribution",
        ATTRIBUTION | {"answer": " "},
        422,
        "The answer ' ' cannot be tokenized by attn-only-2l: Empty input",
    ),
    (
        "attribution",
        ATTRIBUTION | {"answer": "3 4"},
        422,
        "The answer '3 4' is 2 tokens for attn-only-2l (['3', '4']); give exactly one token, "
        "e.g. '3'.",
    ),
    (
        "attribution",
        {"model": CHAR, "prompt": "ROMEO", "answer": "~"},
        422,
        "The answer '~' cannot be tokenized by shakespeare-char: Characters ['~'] are not in "
        "this model's alphabet",
    ),
    (
        "attribution",
        {"model": CHAR, "prompt": "ROMEO", "answer": "ab"},
        422,
        "The answer 'ab' is 2 tokens for shakespeare-char",
    ),
    (
        "patching",
        PATCHING | {"answer": "e"},
        422,
        f"The answer 'e' cannot be tokenized by attn-only-2l: {NOT_A_SYMBOL}",
    ),
    ("patching", PATCHING | {"wrong_answer": "e"}, 422, "The wrong answer 'e' cannot be tokenized"),
    ("patching", PATCHING | {"answer": "3 4"}, 422, "The answer '3 4' is 2 tokens"),
    (
        "patching",
        PATCHING | {"corrupted": "1 2 e"},
        422,
        f"The corrupted prompt cannot be tokenized by attn-only-2l: {NOT_A_SYMBOL}",
    ),
    (
        "patching",
        PATCHING | {"corrupted": "1 2"},
        422,
        "The corrupted prompt is 3 tokens and the prompt 4",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "1 e"},
        422,
        f"The prompt cannot be tokenized by attn-only-2l: {NOT_A_SYMBOL}",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "   "},
        422,
        "The prompt '   ' has no tokens for attn-only-2l (only whitespace?); type some text, "
        "e.g. '23 187 402'.",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": ""},
        422,
        "prompt: String should have at least 1 character",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "1 " * 64},
        422,
        "The prompt is 65 tokens; this server takes at most 64 for attn-only-2l",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "1" * 4001},
        422,
        "prompt: String should have at most 4000 characters",
    ),
    (
        "logit_lens",
        {"model": "gpt-17", "prompt": "1"},
        404,
        "unknown model 'gpt-17': this server serves attn-only-2l, shakespeare-char",
    ),
    (
        "head_scores",
        {"model": CHAR, "prompt": "~"},
        422,
        "Characters ['~'] are not in this model's alphabet",
    ),
    (
        "attention",
        {"model": CHAR, "prompt": "ROMEO", "layer": 9},
        422,
        "layer 9 is out of range: shakespeare-char has",
    ),
    (
        "sae_features",
        {"model": CHAR, "prompt": "ROMEO"},
        404,
        "No SAE is loaded for shakespeare-char",
    ),
]


@pytest.mark.parametrize("route, body, status, message", BAD)
def test_each_bad_value_is_named_in_a_4xx_json_and_the_server_keeps_serving(
    client, route, body, status, message
):
    response = client.post(f"/api/{route}", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert message in response.json()["error"]
    assert_serving(client)


@pytest.mark.parametrize(
    "path, status, message",
    [
        ("/sae/gpt-17/feature/3", 404, "unknown model 'gpt-17'"),
        ("/sae/attn-only-2l/feature/3", 404, "No SAE is loaded for attn-only-2l"),
        ("/sae/attn-only-2l/feature/x", 422, "feature: Input should be a valid integer"),
    ],
)
def test_a_bad_feature_page_is_a_json_error(client, path, status, message):
    response = client.get(path)
    assert response.status_code == status and message in response.json()["error"]
    assert_serving(client)


def test_each_model_has_an_example_prompt_it_reads(client):
    models = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert (models[ATTN]["example_prompt"], models[ATTN]["example_corrupted"]) == SYMBOLS
    for name, model in models.items():
        prompt, corrupted = model["example_prompt"], model["example_corrupted"]
        lengths = [
            len(client.post("/api/prompt", json={"model": name, "prompt": text}).json()["tokens"])
            for text in (prompt, corrupted)
        ]
        assert prompt != corrupted and lengths[0] == lengths[1] > 1, name


@pytest.mark.parametrize("name", [ATTN, CHAR])
def test_each_example_is_a_well_conditioned_patching_run(client, name):
    model = next(m for m in client.get("/api/models").json()["models"] if m["name"] == name)
    body = {"model": name, "prompt": model["example_prompt"]}
    job = client.post("/api/patching", json=body | {"corrupted": model["example_corrupted"]})
    result = wait_for(client, job.json()["id"])["result"]
    assert result["warning"] is None  # the default answers' gap is at least MIN_PATCHING_GAP
    assert abs(result["clean_logit_diff"] - result["corrupted_logit_diff"]) >= MIN_PATCHING_GAP


def test_a_patching_result_warns_when_clean_and_corrupted_are_too_close(client):
    def patching(corrupted):
        body = {"model": ATTN, "prompt": SYMBOLS[0], "corrupted": corrupted}
        body |= {"answer": "501", "wrong_answer": "77"}
        job = client.post("/api/patching", json=body).json()
        return wait_for(client, job["id"])["result"]

    apart, same = patching(SYMBOLS[1]), patching(SYMBOLS[0])
    assert abs(apart["clean_logit_diff"] - apart["corrupted_logit_diff"]) > MIN_PATCHING_GAP
    assert apart["warning"] is None
    assert same["clean_logit_diff"] == pytest.approx(same["corrupted_logit_diff"], abs=1e-4)
    assert f"differ by 0.000, under {MIN_PATCHING_GAP}" in same["warning"]
    assert "ill-conditioned" in same["warning"]
