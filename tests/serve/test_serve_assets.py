"""The dashboard's assets: gzip-compressed on the wire when the browser accepts it, with an
ETag (a repeat request naming it gets 304 and no body) and Cache-Control; JSON answers
compressed too."""

from __future__ import annotations

import gzip

import pytest
from starlette.testclient import TestClient

import interp
from interp.serve import create_app

LOCAL = {"base_url": "http://127.0.0.1", "client": ("127.0.0.1", 50000)}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app({"attn-only-2l": interp.load_model("attn-only-2l")}), **LOCAL) as c:
        yield c


def raw_get(client, path, **headers):
    """The response as sent: httpx would otherwise undo the gzip."""
    with client.stream("GET", path, headers=headers) as response:
        return response, b"".join(response.iter_raw())


@pytest.mark.parametrize(
    ("path", "cache"),
    [("/vendor/plotly-cartesian.min.js", "public, max-age=86400"), ("/static/app.js", "no-cache")],
)
def test_assets_are_compressed_and_revalidated_by_etag(client, path, cache):
    response, body = raw_get(client, path, **{"accept-encoding": "gzip"})
    assert response.status_code == 200 and response.headers["content-encoding"] == "gzip"
    assert response.headers["cache-control"] == cache
    plain = client.get(path, headers={"accept-encoding": "identity"})
    assert "content-encoding" not in plain.headers and gzip.decompress(body) == plain.content
    assert len(body) < len(plain.content) / 2
    again, empty = raw_get(client, path, **{"if-none-match": response.headers["etag"]})
    assert again.status_code == 304 and empty == b""
    stale, _ = raw_get(client, path, **{"if-none-match": '"another version"'})
    assert stale.status_code == 200


def test_json_answers_are_compressed(client):
    body = {"model": "attn-only-2l", "prompt": "1 2 3 4 5 6 7 8 9 " * 4, "layer": 0}
    with client.stream("POST", "/api/attention", json=body) as response:
        assert response.headers["content-encoding"] == "gzip"
