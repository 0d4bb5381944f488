"""The dashboard's JSON API (interp.serve.app) against interp computed directly: every route's
numbers, one shared forward per prompt, patching jobs (progress, events, cancel), and clear
JSON 4xx errors for bad input after which the server keeps serving."""

from __future__ import annotations

import json
import threading
import time

import pytest
import torch
from starlette.testclient import TestClient

import interp
from interp.analysis import direct_logit_attribution, head_scores, logit_lens
from interp.cli import DEMO_CORRUPTED, DEMO_PROMPT
from interp.patching import (
    LogitDiff,
    get_act_patch_attn_head_out_all_pos,
    get_act_patch_resid_pre,
)
from interp.serve import create_app
from tests.support.tolerances import error_bound, model_error_bound

LOCAL = {"base_url": "http://127.0.0.1", "client": ("127.0.0.1", 50000)}
ATTN = "attn-only-2l"
CHAR = "shakespeare-char"
CHAR_PROMPT = "ROMEO: What say you"


@pytest.fixture(scope="module")
def models():
    return {name: interp.load_model(name) for name in (ATTN, CHAR)}


@pytest.fixture(scope="module")
def app(models):
    return create_app(models)


@pytest.fixture(scope="module")
def client(app):
    with TestClient(app, **LOCAL) as client:
        yield client


def post(client, route, **body):
    response = client.post(f"/api/{route}", json=body)
    return response.status_code, response.json()


def wait_for(client, job_id):
    deadline = time.monotonic() + 60
    while (status := client.get(f"/api/jobs/{job_id}").json())["state"] == "running":
        assert time.monotonic() < deadline, status
        time.sleep(0.02)
    return status


def assert_serving(client):
    code, body = post(client, "prompt", model=ATTN, prompt="1 2 3")
    assert code == 200 and body["tokens"] == ["<|bos|>", "1", "2", "3"]


def test_models_lists_those_served(client, models):
    body = client.get("/api/models").json()
    assert [m["name"] for m in body["models"]] == [ATTN, CHAR]
    char = body["models"][1]
    cfg = models[CHAR].cfg
    assert (char["n_layers"], char["n_heads"], char["d_vocab"]) == (
        cfg.n_layers,
        cfg.n_heads,
        cfg.d_vocab,
    )
    assert char["max_tokens"] == cfg.n_ctx and char["has_sae"] is False


def test_prompt_gives_tokens_and_top_predictions(client, models):
    code, body = post(client, "prompt", model=CHAR, prompt=CHAR_PROMPT)
    model = models[CHAR]
    logits = model(CHAR_PROMPT)[0, -1]
    probs = logits.softmax(-1)
    top = probs.topk(10)
    assert code == 200
    assert body["tokens"] == model.to_str_tokens(CHAR_PROMPT)
    assert body["token_ids"] == model.to_tokens(CHAR_PROMPT)[0].tolist()
    assert [p["token_id"] for p in body["top_predictions"]] == top.indices.tolist()
    # The server's own forward: a probability moves by at most twice its logits' error.
    bound = model_error_bound(model.cfg, 2 * logits.abs().max())
    assert [p["prob"] for p in body["top_predictions"]] == pytest.approx(
        top.values.tolist(), abs=bound
    )
    assert body["top_predictions"][0]["token"] == model.tokenizer.token_str(int(top.indices[0]))


def test_attention_gives_a_layer_or_one_head(client, models):
    _, cache = models[CHAR].run_with_cache(CHAR_PROMPT)
    code, layer = post(client, "attention", model=CHAR, prompt=CHAR_PROMPT, layer=2)
    assert code == 200 and layer["head"] is None
    # The API rounds patterns to 5 decimals (half a step off at most), after its own forward
    # (a probability moves by at most twice its scores' error).
    scores = cache["attn_scores", 2][cache["attn_scores", 2].isfinite()]
    atol = 0.5e-5 + model_error_bound(models[CHAR].cfg, 2 * scores.abs().max())
    torch.testing.assert_close(
        torch.tensor(layer["patterns"]), cache["pattern", 2][0], atol=atol, rtol=0
    )
    code, head = post(client, "attention", model=CHAR, prompt=CHAR_PROMPT, layer=2, head=3)
    assert code == 200 and head["head"] == 3
    torch.testing.assert_close(
        torch.tensor(head["patterns"][0]), cache["pattern", 2][0, 3], atol=atol, rtol=0
    )


def test_logit_lens_equals_the_analysis(client, models):
    model = models[CHAR]
    lens = logit_lens(model, CHAR_PROMPT, top_k=1)
    code, body = post(client, "logit_lens", model=CHAR, prompt=CHAR_PROMPT)
    assert code == 200 and body["stages"] == lens.labels
    torch.testing.assert_close(torch.tensor(body["top_probs"]), lens.top_probs[:, 0, :, 0])
    ids = lens.top_tokens[:, 0, :, 0].tolist()
    assert body["top_tokens"] == [[model.tokenizer.token_str(i) for i in row] for row in ids]


def test_attribution_equals_direct_logit_attribution(client, models):
    model = models[CHAR]
    code, body = post(
        client, "attribution", model=CHAR, prompt=CHAR_PROMPT, answer="u", wrong_answer="e"
    )
    answer, wrong = model.to_single_token("u"), model.to_single_token("e")
    dla = direct_logit_attribution(model, CHAR_PROMPT, answer, wrong)
    assert code == 200 and (body["answer"], body["wrong_answer"]) == ("u", "e")
    torch.testing.assert_close(torch.tensor(body["heads"]), dla.head_attributions[..., 0])
    torch.testing.assert_close(torch.tensor(body["mlps"]), dla.mlp_attributions[:, 0])
    total = sum(map(sum, body["heads"])) + sum(body["mlps"]) + sum(body["other"].values())
    # The components' total (each a dot product over d_model) against the logit difference.
    terms = dla.attributions.abs().sum()
    reduction = dla.attributions.shape[0] * model.cfg.d_model
    bound = error_bound(torch.float32, reduction=reduction, magnitude=terms)
    assert total == pytest.approx(body["logit_diff"], abs=bound)
    bound = model_error_bound(model.cfg, terms)  # the server's own forward
    assert body["logit_diff"] == pytest.approx(float(dla.logit_diff[0]), abs=bound)
    # Default answer: the top prediction; no wrong answer; attention-only: no MLPs.
    code, body = post(client, "attribution", model=ATTN, prompt=DEMO_PROMPT)
    assert code == 200 and body["answer"] == "501" and body["wrong_answer"] is None
    assert body["mlps"] is None


def test_head_scores_equal_the_analysis(client, models):
    model = models[ATTN]
    expected = head_scores(model, DEMO_PROMPT)
    code, body = post(client, "head_scores", model=ATTN, prompt=DEMO_PROMPT)
    assert code == 200
    names = {"previous token": "previous_token_head", "duplicate token": "duplicate_token_head"}
    names["induction"] = "induction_head"
    for kind, name in names.items():
        torch.testing.assert_close(torch.tensor(body["scores"][kind]), expected[name])


def test_one_forward_per_prompt_is_shared_by_every_route(app, models):
    worker = app.app.state.workers[CHAR]
    prompt = "ROMEO: once"
    with TestClient(app, **LOCAL) as client:
        forwards = worker.forwards
        for route, extra in [("prompt", {}), ("attention", {"layer": 0}), ("logit_lens", {})]:
            assert post(client, route, model=CHAR, prompt=prompt, **extra)[0] == 200
        assert post(client, "head_scores", model=CHAR, prompt=prompt)[0] == 200
        assert post(client, "attribution", model=CHAR, prompt=prompt)[0] == 200
    assert worker.forwards == forwards + 1


def test_the_forward_cache_is_bounded():
    from interp.serve.worker import ForwardCache, ModelWorker

    model = interp.load_model(ATTN)
    worker = ModelWorker(ATTN, model, ForwardCache(max_entries=3))
    for n in range(6):
        worker.forward(f"1 2 {n}")
    assert len(worker.cache) == 3
    assert worker.cache.get((ATTN, "1 2 5")) is not None
    assert worker.cache.get((ATTN, "1 2 0")) is None
    one = worker.cache.get((ATTN, "1 2 5")).n_bytes
    small = ForwardCache(max_bytes=2 * one)
    worker = ModelWorker(ATTN, model, small)
    for n in range(5):
        worker.forward(f"1 2 {n}")
    assert len(small) == 2


@pytest.mark.parametrize("step_rows, steps", [(32, 4), (5, 12)])  # 24 positions, 1 head
def test_patching_job_equals_the_batched_sweeps(client, models, monkeypatch, step_rows, steps):
    from interp.serve import analyses

    monkeypatch.setattr(analyses, "STEP_ROWS", step_rows)
    model = models[ATTN]
    code, started = post(
        client, "patching", model=ATTN, prompt=DEMO_PROMPT, corrupted=DEMO_CORRUPTED
    )
    assert code == 202 and started["state"] == "running" and started["total"] == steps
    status = wait_for(client, started["id"])
    assert status["state"] == "done" and status["done"] == steps
    result = status["result"]
    answer, wrong = model.to_single_token("501"), model.to_single_token("77")
    assert (result["answer"], result["wrong_answer"]) == ("501", "77")
    clean, corrupted = model.to_tokens(DEMO_PROMPT), model.to_tokens(DEMO_CORRUPTED)
    with torch.no_grad():
        logits, cache = model.run_with_cache(clean)
        corrupted_logits = model(corrupted)

    def diff(x):
        return float(x[0, -1, answer] - x[0, -1, wrong])

    clean_diff, corrupted_diff = diff(logits), diff(corrupted_logits)
    # Logit differences (twice a logit's error) of the job's own forwards.
    largest = max(logits.abs().max(), corrupted_logits.abs().max())
    bound = 2 * model_error_bound(model.cfg, largest)
    assert result["clean_logit_diff"] == pytest.approx(clean_diff, abs=bound)
    metric = LogitDiff(torch.tensor([answer, wrong]))
    expected = {
        "resid_pre": get_act_patch_resid_pre(model, corrupted, cache, metric, progress=False),
        "heads": get_act_patch_attn_head_out_all_pos(
            model, corrupted, cache, metric, progress=False
        ),
    }
    for key, values in expected.items():
        normalised = (values.as_subclass(torch.Tensor) - corrupted_diff) / (
            clean_diff - corrupted_diff
        )
        # Two logit differences subtracted, divided by clean_diff - corrupted_diff.
        atol = 2 * bound / abs(clean_diff - corrupted_diff)
        torch.testing.assert_close(torch.tensor(result[key]), normalised, atol=atol, rtol=0)
    assert result["resid_pre"][0][12] == pytest.approx(1.0, abs=atol)  # the changed symbol


def test_patching_events_stream_progress_to_the_result(client):
    code, started = post(client, "patching", model=CHAR, prompt="ROMEO: yes", corrupted="JULIET: n")
    assert code == 422 and "is 9 tokens and the prompt 10" in started["error"]
    code, started = post(
        client, "patching", model=CHAR, prompt="ROMEO: yes", corrupted="ROMEO: yet"
    )
    assert code == 202
    events = []
    with client.stream("GET", f"/api/jobs/{started['id']}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        for line in stream.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    assert events[-1]["state"] == "done" and events[-1]["done"] == 8
    assert [e["done"] for e in events] == sorted(e["done"] for e in events)
    assert len(events[-1]["result"]["heads"]) == 4


def test_a_cancelled_job_stops_at_its_next_step(app, monkeypatch):
    from interp.serve import analyses

    entered, release = threading.Event(), threading.Event()
    sweep = analyses.generic_activation_patch

    def slow_sweep(*args, **kwargs):  # the first sweep waits, as on a big model
        entered.set()
        release.wait(30)
        return sweep(*args, **kwargs)

    monkeypatch.setattr(analyses, "generic_activation_patch", slow_sweep)
    with TestClient(app, **LOCAL) as client:
        body = {"model": CHAR, "prompt": "ROMEO: go", "corrupted": "ROMEO: so"}
        code, started = post(client, "patching", **body)
        assert code == 202 and entered.wait(30)
        cancelled = client.delete(f"/api/jobs/{started['id']}").json()
        assert cancelled["state"] == "running" and cancelled["done"] == 0
        assert_serving(client)  # the job's thread is busy; requests are not
        release.set()
        status = wait_for(client, started["id"])
        assert status["state"] == "cancelled" and status["done"] == 1 and status["result"] is None
        assert_serving(client)


def test_too_many_running_jobs_are_refused(models):
    from interp.serve.jobs import Jobs

    release = threading.Event()
    jobs = Jobs(threads=1, max_unfinished=2)
    jobs.start(1, lambda step: release.wait(10) and {})
    waiting = jobs.start(1, lambda step: {})  # queued behind the first
    assert waiting.state == "running" and waiting.done == 0
    from interp.serve.errors import ApiError

    with pytest.raises(ApiError, match="2 jobs are running or waiting") as error:
        jobs.start(1, lambda step: {})
    assert error.value.status == 429
    release.set()
    jobs.shutdown()


BAD_REQUESTS = [
    (
        "prompt",
        {"model": "gpt-17", "prompt": "1 2"},
        404,
        "unknown model 'gpt-17': this server serves attn-only-2l, shakespeare-char",
    ),
    ("prompt", {"model": "attn-only-21", "prompt": "1 2"}, 404, "did you mean 'attn-only-2l'?"),
    (
        "prompt",
        {"model": "../../etc/passwd", "prompt": "1 2"},
        404,
        "unknown model '../../etc/passwd'",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": ""},
        422,
        "prompt: String should have at least 1 character",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "1 " * 2001},
        422,
        "prompt: String should have at most 4000 characters",
    ),
    (
        "prompt",
        {"model": ATTN, "prompt": "1 " * 64},
        422,
        "The prompt is 65 tokens; this server takes at most 64 for attn-only-2l",
    ),
    ("prompt", {"model": ATTN, "prompt": "hello"}, 422, "'hello' is not a symbol of this model"),
    ("prompt", {"model": ATTN}, 422, "prompt: Field required"),
    (
        "prompt",
        {"model": ATTN, "prompt": "1", "path": "/etc"},
        422,
        "path: Extra inputs are not permitted",
    ),
    (
        "attention",
        {"model": ATTN, "prompt": "1 2", "layer": 2},
        422,
        "layer 2 is out of range: attn-only-2l has 2 layers (0 to 1).",
    ),
    (
        "attention",
        {"model": ATTN, "prompt": "1 2", "layer": -1},
        422,
        "layer: Input should be greater than or equal to 0",
    ),
    (
        "attention",
        {"model": CHAR, "prompt": "a", "layer": 0, "head": 4},
        422,
        "head 4 is out of range: shakespeare-char has 4 heads per layer (0 to 3).",
    ),
    (
        "attention",
        {"model": ATTN, "prompt": "1 2", "layer": "x"},
        422,
        "layer: Input should be a valid integer",
    ),
    (
        "attribution",
        {"model": ATTN, "prompt": "1 2", "answer": "1 2"},
        422,
        "The answer '1 2' is 2 tokens for attn-only-2l",
    ),
    (
        "attribution",
        {"model": ATTN, "prompt": "1 2", "answer": "3", "wrong_answer": "3"},
        422,
        "The answer and wrong answer are the same token",
    ),
    (
        "patching",
        {"model": ATTN, "prompt": "1 2 3", "corrupted": "1 2"},
        422,
        "The corrupted prompt is 3 tokens and the prompt 4 (BOS included)",
    ),
    (
        "patching",
        {"model": ATTN, "prompt": "1 2 3", "corrupted": ""},
        422,
        "corrupted: String should have at least 1 character",
    ),
    (
        "patching",
        {
            "model": ATTN,
            "prompt": "1 2 3",
            "corrupted": "1 2 4",
            "answer": "3",
            "wrong_answer": "3",
        },
        422,
        "same token",
    ),
    (
        "sae_features",
        {"model": ATTN, "prompt": "1 2"},
        404,
        "No SAE is loaded for attn-only-2l; start the server with --sae PATH.",
    ),
]


@pytest.mark.parametrize("route, body, status, message", BAD_REQUESTS)
def test_bad_input_is_a_clear_json_error_and_the_server_keeps_serving(
    client, route, body, status, message
):
    response = client.post(f"/api/{route}", json=body)
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert message in response.json()["error"]
    assert_serving(client)


def test_unknown_job_and_route_and_bad_json(client):
    response = client.get("/api/jobs/nope")
    assert response.status_code == 404 and response.json() == {
        "error": "no job 'nope': it never existed or was cleared."
    }
    assert client.delete("/api/jobs/nope").status_code == 404
    response = client.post(
        "/api/prompt", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422 and "JSON decode error" in response.json()["error"]
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/index.html").json() == {"error": "no static file 'index.html'."}
    assert_serving(client)


def test_request_bodies_are_bounded(client):
    body = json.dumps({"model": ATTN, "prompt": "1 " * 40000}).encode()
    response = client.post(
        "/api/prompt", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json() == {"error": "The request body is over 65536 bytes."}

    def chunked():  # no content-length: counted as it arrives
        yield b'{"model": "attn-only-2l", "prompt": "'
        for _ in range(70):
            yield b"1 " * 500
        yield b'"}'

    response = client.post(
        "/api/prompt", content=chunked(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413
    assert response.json() == {"error": "The request body is over 65536 bytes."}
    pieces = iter([b'{"model": "attn-only-2l", ', b'"prompt": "1"}'])
    small = client.post("/api/prompt", content=pieces, headers={"content-type": "application/json"})
    assert small.status_code == 200 and small.json()["tokens"] == ["<|bos|>", "1"]
    assert_serving(client)


def test_the_page_and_its_scripts_are_served_locally(client):
    from interp.viz.report import STATIC

    page = client.get("/")
    assert (
        page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
    )
    sources = ["vendor/plotly-cartesian.min.js", "vendor/attention.js", "static/api.js"]
    sources.append("static/app.js")
    for source in sources:
        assert f'src="{source}"' in page.text
    assert "http" not in page.text.replace('href="data:,"', "")  # no CDN, no absolute URL
    for name in ("plotly-cartesian.min.js", "attention.js"):
        assert client.get(f"/vendor/{name}").content == (STATIC / name).read_bytes()
    assert client.get("/vendor/../app.py").status_code == 404
    assert client.get("/static/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/static/style.css").status_code == 200


def test_the_openapi_schema_documents_every_route(client):
    schema = client.get("/openapi.json").json()
    routes = {(method.upper(), path) for path, item in schema["paths"].items() for method in item}
    assert routes == {
        ("GET", "/api/models"),
        ("POST", "/api/prompt"),
        ("POST", "/api/attention"),
        ("POST", "/api/logit_lens"),
        ("POST", "/api/attribution"),
        ("POST", "/api/head_scores"),
        ("POST", "/api/sae_features"),
        ("POST", "/api/patching"),
        ("GET", "/api/jobs/{job_id}"),
        ("DELETE", "/api/jobs/{job_id}"),
        ("GET", "/api/jobs/{job_id}/events"),
        ("GET", "/api/features/{model}"),  # the feature browser's (interp.serve.features)
        ("GET", "/api/features/{model}/{f}"),
        ("POST", "/api/features/search"),
        ("POST", "/api/features/token"),
        ("POST", "/api/features/prompt"),
        ("POST", "/api/steer"),
    }
    assert "PatchingRequest" in schema["components"]["schemas"]
    assert client.get("/docs").status_code == 404  # FastAPI's docs page loads a CDN: off


def test_sae_features_are_the_strongest_per_token(models):
    from interp.sae import load_sae
    from interp.serve.cli import attach_saes

    saes = attach_saes({CHAR: models[CHAR]}, ["shakespeare-char-resid-l1"])
    sae = saes[CHAR]
    with TestClient(create_app({CHAR: models[CHAR]}, saes=saes), **LOCAL) as client:
        assert client.get("/api/models").json()["models"][0]["has_sae"] is True
        code, body = post(client, "sae_features", model=CHAR, prompt=CHAR_PROMPT)
    _, cache = models[CHAR].run_with_cache(CHAR_PROMPT)
    expected = load_sae("shakespeare-char-resid-l1").encode(cache[sae.cfg.hook_name][0])
    top = expected.topk(5, dim=-1)
    assert code == 200 and body["hook"] == "blocks.1.hook_resid_post"
    assert [[f["feature"] for f in row] for row in body["features"]] == top.indices.tolist()
    values = torch.tensor([[f["activation"] for f in row] for row in body["features"]])
    torch.testing.assert_close(values, top.values)


def test_sae_feature_page_shows_top_logits_and_prompt_activations(models):
    import html

    from interp.sae.features import top_logits
    from interp.serve.cli import attach_saes

    saes = attach_saes({CHAR: models[CHAR]}, ["shakespeare-char-resid-l1"])
    sae = saes[CHAR]
    hostile = "ROMEO' &lt;b"  # of HTML's special characters, the char model has ' and &
    with TestClient(create_app({CHAR: models[CHAR]}, saes=saes), **LOCAL) as client:
        page = client.get(f"/sae/{CHAR}/feature/7", params={"prompt": hostile})
        bare = client.get(f"/sae/{CHAR}/feature/7")
        out_of_range = client.get(f"/sae/{CHAR}/feature/{sae.cfg.d_sae}")
        negative = client.get(f"/sae/{CHAR}/feature/-1")
        too_long = client.get(f"/sae/{CHAR}/feature/7", params={"prompt": "a" * 4001})
    assert page.status_code == 200 and bare.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'self'")
    logits = top_logits(models[CHAR], sae, 7)
    for kind in ("promoted", "suppressed"):
        for token, weight in logits[kind]:
            cell = f"<td class='tok'>{html.escape(repr(token))}</td><td>{weight:+.3f}</td>"
            assert cell in page.text and cell in bare.text
    assert ">&amp;</span>" in page.text and ">&#x27;</span>" in page.text
    assert ">&</span>" not in page.text and ">'</span>" not in page.text
    assert "On the prompt" in page.text and "On the prompt" not in bare.text
    message = f"Feature {sae.cfg.d_sae} is out of range: {CHAR}'s SAE has features 0 to "
    assert out_of_range.status_code == 422
    assert out_of_range.json() == {"error": message + f"{sae.cfg.d_sae - 1}."}
    assert negative.status_code == 422 and "Feature -1 is out of range" in negative.json()["error"]
    assert too_long.status_code == 422 and "prompt" in too_long.json()["error"]


def test_sae_feature_page_without_an_sae_is_a_404(client):
    response = client.get(f"/sae/{CHAR}/feature/0")
    assert response.status_code == 404
    assert response.json() == {
        "error": f"No SAE is loaded for {CHAR}; start the server with --sae PATH."
    }
