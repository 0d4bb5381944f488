"""The feature browser's API (interp.serve.features): dataset statistics equal
``top_activations``'s and are cached on disk by model, SAE, data and settings; search by id,
promoted token and context text; a token's strongest features; steering equals the same edit
made in Python (an SAE spliced with its error term, a neuron or direction hook)."""

from __future__ import annotations

import pytest
import torch
from starlette.testclient import TestClient

import interp
from interp.sae.features import (
    feature_acts,
    feature_logit_weights,
    text_windows,
    top_activations,
    top_logits,
)
from interp.sae.splice import HookedSAETransformer
from interp.serve import create_app
from interp.serve.feature_index import FeatureIndex
from interp.train import default_text

LOCAL = {"base_url": "http://127.0.0.1", "client": ("127.0.0.1", 50000)}
CHAR = "shakespeare-char"
PROMPT = "ROMEO: What say you"


@pytest.fixture(scope="module")
def model():
    return interp.load_model(CHAR)


@pytest.fixture(scope="module")
def sae():
    return interp.load_sae("shakespeare-char-resid-l1")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("data") / "data.txt"
    path.write_text(default_text()[:4000])
    return path


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def index(model, sae, data, cache_dir):
    return FeatureIndex.build(model, sae, data, cache_dir=cache_dir)


@pytest.fixture(scope="module")
def client(model, sae, index):
    app = create_app({CHAR: model}, saes={CHAR: sae}, feature_indexes={CHAR: index})
    with TestClient(app, **LOCAL) as client:
        yield client


def post(client, route, **body):
    response = client.post(f"/api/{route}", json=body)
    return response.status_code, response.json()


def test_the_index_is_top_activations_and_a_second_start_reads_the_cache(
    model, sae, data, cache_dir, index
):
    expected = top_activations(model, sae, text_windows(model, data.read_text()), k=10)
    torch.testing.assert_close(index.stats.top_values, expected.top_values)
    assert torch.equal(index.stats.fire_count, expected.fire_count)
    assert not index.from_cache and index.path.parent == cache_dir
    again = FeatureIndex.build(model, sae, data, cache_dir=cache_dir)
    assert again.from_cache and again.path == index.path
    assert torch.equal(again.stats.histogram, index.stats.histogram)
    assert again.context_text == index.context_text


def test_the_cache_is_keyed_by_data_settings_and_weights(model, sae, data, cache_dir, index):
    other = data.with_name("other.txt")
    other.write_text(default_text()[4000:8000])
    fresh = FeatureIndex.build(model, sae, other, cache_dir=cache_dir)
    assert not fresh.from_cache and fresh.path != index.path
    fewer = FeatureIndex.build(model, sae, data, cache_dir=cache_dir, k=5)
    assert not fewer.from_cache and fewer.stats.top_values.shape[1] == 5
    changed = interp.load_sae("shakespeare-char-resid-l1")
    with torch.no_grad():
        changed.W_dec[0] += 1.0
    assert FeatureIndex.build(model, changed, data, cache_dir=cache_dir).path != index.path


def test_a_feature_shows_its_dataset_statistics_and_prompt_activations(client, model, sae, index):
    f = index.stats.most_active(1)[0]
    detail = client.get(f"/api/features/{CHAR}/{f}", params={"prompt": PROMPT}).json()
    dataset = detail["dataset"]
    assert dataset["density"] == pytest.approx(float(index.stats.density[f]))
    assert dataset["histogram"]["counts"] == index.stats.histogram[f].tolist()
    assert dataset["contexts"][0]["value"] == pytest.approx(float(index.stats.top_values[f, 0]))
    acts = feature_acts(model, sae, model.to_tokens(PROMPT))[0, :, f]
    torch.testing.assert_close(torch.tensor(detail["prompt"]["acts"]), acts, atol=1e-5, rtol=0)
    logits = top_logits(model, sae, f, 10)  # what `interp features` pages show
    for kind in ("promoted", "suppressed"):
        assert [e["token"] for e in detail[kind]] == [token for token, _ in logits[kind]]
        shown = [e["weight"] for e in detail[kind]]
        assert shown == pytest.approx([weight for _, weight in logits[kind]], abs=1e-6)
    code, error = post(client, "features/search", model=CHAR, query="4096", by="id")
    assert code == 422 and "out of range" in error["error"]


def test_search_by_id_promoted_token_and_context_text(client, model, sae, index):
    code, found = post(client, "features/search", model=CHAR, query="7", by="id")
    assert code == 200 and [r["feature"] for r in found["results"]] == [7]
    token = model.to_single_token("e")
    code, found = post(client, "features/search", model=CHAR, query="e", by="token")
    weights = feature_logit_weights(model, sae)
    assert code == 200 and 0 < len(found["results"]) <= 20
    for result in found["results"]:
        assert token in weights[result["feature"]].topk(10).indices.tolist()
    code, found = post(client, "features/search", model=CHAR, query="Citizen", by="text")
    assert code == 200 and found["results"]
    for result in found["results"]:
        assert "citizen" in index.context_text[result["feature"]]
    code, error = post(client, "features/search", model=CHAR, query="ee", by="token")
    assert code == 422 and "2 tokens" in error["error"]


def test_a_token_lists_its_ten_strongest_features(client, model, sae):
    code, data = post(client, "features/token", model=CHAR, prompt=PROMPT, position=3)
    acts = feature_acts(model, sae, model.to_tokens(PROMPT))[0, 3]
    assert code == 200 and len(data["features"]) == 10
    assert [f["feature"] for f in data["features"]] == acts.topk(10).indices.tolist()
    code, error = post(client, "features/token", model=CHAR, prompt=PROMPT, position=99)
    assert code == 422 and "position 99" in error["error"]


def steered_logits(client, edit):
    code, data = post(client, "steer", model=CHAR, prompt=PROMPT, edits=[edit], n_new=3)
    assert code == 200, data
    return data


def assert_logits_equal(data, reference):
    for entry in data["steered"]["top"]:
        assert entry["logit"] == pytest.approx(float(reference[entry["token_id"]]), abs=1e-4)
    assert data["steered"]["top"][0]["token_id"] == int(reference.argmax())


@pytest.mark.parametrize(("mode", "value"), [("clamp", 8.0), ("add", 3.0), ("ablate", 0.0)])
def test_steering_a_feature_equals_the_spliced_sae_hook(client, model, sae, mode, value):
    f = 185
    data = steered_logits(client, {"target": "feature", "feature": f, "mode": mode, "value": value})

    def edit(acts, hook):
        new = {"clamp": torch.full_like(acts[..., f], value), "add": acts[..., f] + value}
        acts[..., f] = new.get(mode, torch.zeros_like(acts[..., f]))
        return acts

    spliced = HookedSAETransformer.from_model(model)
    with torch.no_grad(), spliced.saes([sae], use_error_term=True):
        hook = f"{sae.cfg.hook_name}.hook_sae_acts_post"
        reference = spliced.run_with_hooks(model.to_tokens(PROMPT), fwd_hooks=[(hook, edit)])
    assert_logits_equal(data, reference[0, -1])
    with torch.no_grad():
        unchanged = model(model.to_tokens(PROMPT))[0, -1]
    assert float((reference[0, -1] - unchanged).abs().max()) > 0.1  # the edit did something
    assert data["baseline"]["top"][0]["logit"] == pytest.approx(float(unchanged.max()), abs=1e-4)


def test_steering_a_neuron_and_a_direction_equals_the_python_hooks(client, model):
    data = steered_logits(
        client, {"target": "neuron", "layer": 1, "neuron": 5, "mode": "clamp", "value": 4.0}
    )

    def clamp(post, hook):
        post[..., 5] = 4.0
        return post

    tokens = model.to_tokens(PROMPT)
    with torch.no_grad():
        reference = model.run_with_hooks(tokens, fwd_hooks=[("blocks.1.mlp.hook_post", clamp)])
    assert_logits_equal(data, reference[0, -1])
    hook_name = "blocks.2.hook_resid_post"
    edit = {"target": "direction", "hook_name": hook_name, "direction_token": "e"}
    data = steered_logits(client, edit | {"mode": "add", "value": 10.0})
    unit = model.W_U[:, model.to_single_token("e")].detach()
    unit = unit / unit.norm()
    with torch.no_grad():
        reference = model.run_with_hooks(
            tokens, fwd_hooks=[(hook_name, lambda x, hook: x + 10.0 * unit)]
        )
    assert_logits_equal(data, reference[0, -1])
    assert data["steered"]["continuation"].startswith("e")


def test_steering_errors_name_the_bad_value(client, model):
    bad = [
        ({"target": "feature", "feature": 5000, "mode": "clamp"}, "feature 5000 is out of range"),
        ({"target": "neuron", "layer": 9, "neuron": 0, "mode": "add"}, "layer 9 is out of range"),
        ({"target": "direction", "hook_name": "nope", "direction": [1.0], "mode": "add"}, "nope"),
        (
            {
                "target": "direction",
                "hook_name": "blocks.0.hook_resid_pre",
                "direction": [1.0],
                "mode": "add",
            },
            "the direction has 1 numbers",
        ),
    ]
    overflow = {"target": "feature", "feature": 3, "mode": "clamp", "value": 1e30}
    bad.append((overflow, "Steering with clamp 1e+30 makes the logits non-finite"))
    for edit, message in bad:
        code, error = post(client, "steer", model=CHAR, prompt=PROMPT, edits=[edit])
        assert code == 422 and message in error["error"], error
    # still serving, and the next forward is the model's own
    code, data = post(client, "features/prompt", model=CHAR, prompt="JULIET: O")
    with torch.no_grad():
        logits = model(model.to_tokens("JULIET: O"))[0, -1]
    assert code == 200 and data["predictions"][0]["prob"] == pytest.approx(
        float(logits.softmax(-1).max()), abs=1e-5
    )


def test_without_data_a_feature_has_no_dataset_part_and_search_says_how(model, sae):
    app = create_app({CHAR: model}, saes={CHAR: sae})
    with TestClient(app, **LOCAL) as client:
        detail = client.get(f"/api/features/{CHAR}/3").json()
        assert "dataset" not in detail and len(detail["promoted"]) == 10
        code, error = post(client, "features/search", model=CHAR, query="a", by="text")
        assert code == 404 and "--data FILE" in error["error"]


def test_serve_data_errors_name_the_fix(model, sae, tmp_path, capsys):
    from interp.cli.support import UsageError
    from interp.serve.cli import feature_indexes

    with pytest.raises(UsageError, match="add --sae NAME"):
        feature_indexes({CHAR: model}, {}, "input.txt", None, None)
    with pytest.raises(UsageError, match="--data 'missing.txt' cannot be used"):
        feature_indexes({CHAR: model}, {CHAR: sae}, "missing.txt", str(tmp_path), None)
    short = tmp_path / "short.txt"
    short.write_text("ROMEO")
    with pytest.raises(UsageError, match="windows of 128"):
        feature_indexes({CHAR: model}, {CHAR: sae}, str(short), str(tmp_path), None)
    assert feature_indexes({CHAR: model}, {CHAR: sae}, None, None, None) == {}


def test_serve_data_shows_a_progress_bar_while_it_mines(model, sae, data, tmp_path, capsys):
    from interp.serve.cli import feature_indexes

    # 4000 characters in windows of 128: 31 windows, one batch of 32
    indexes = feature_indexes({CHAR: model}, {CHAR: sae}, str(data), str(tmp_path), None)
    captured = capsys.readouterr()
    assert "mining blocks.1.hook_resid_post: 100%" in captured.err and "1/1" in captured.err
    assert "computed and cached in" in captured.out and not indexes[CHAR].from_cache
    feature_indexes({CHAR: model}, {CHAR: sae}, str(data), str(tmp_path), None)
    captured = capsys.readouterr()  # read from the cache: nothing to mine
    assert "mining" not in captured.err and "read from" in captured.out
