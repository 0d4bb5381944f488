"""The dashboard's gate (interp.serve.auth), its server thread, the notebook's
``interp.viz.dashboard`` and the ``interp serve`` command's checks."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import pytest
from starlette.testclient import TestClient

import interp
from interp.cli import main
from interp.serve import BackgroundServer, create_app

ATTN = "attn-only-2l"
BODY = {"model": ATTN, "prompt": "1 2 3"}
REMOTE = ("203.0.113.7", 40000)  # a documentation address: not this machine


@pytest.fixture(scope="module")
def model():
    return interp.load_model(ATTN)


def port_is_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_without_a_token_only_local_requests_are_answered(model):
    app = create_app({ATTN: model})
    with TestClient(app, base_url="http://127.0.0.1", client=REMOTE) as remote:
        for response in (remote.get("/"), remote.post("/api/prompt", json=BODY)):
            assert response.status_code == 403
            assert response.json()["error"].startswith(
                "This server answers only requests from this machine; to serve others, restart "
                "it with --host ADDRESS and --token TOKEN."
            )
    with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5)) as local:
        assert local.post("/api/prompt", json=BODY).status_code == 200
        # A page elsewhere that rebinds its name to 127.0.0.1 sends its own Host header.
        response = local.get("/api/models", headers={"host": "evil.example:8000"})
        assert response.status_code == 403 and "'evil.example:8000'" in response.json()["error"]
    with TestClient(app, base_url="http://localhost:8000", client=("::1", 5)) as local:
        assert local.get("/api/models").status_code == 200


def test_with_a_token_every_request_needs_it(model):
    app = create_app({ATTN: model}, token="s3cret-token")
    with TestClient(app, base_url="http://example.org", client=REMOTE) as client:
        for response in (
            client.get("/"),
            client.get("/vendor/plotly-cartesian.min.js"),
            client.post("/api/prompt", json=BODY),
            client.post("/api/prompt", json=BODY, headers={"authorization": "Bearer wrong"}),
            client.get("/api/models", params={"token": "s3cret-tokenX"}),
        ):
            assert response.status_code == 401
            assert "A valid token is required" in response.json()["error"]
        ok = client.post("/api/prompt", json=BODY, headers={"authorization": "Bearer s3cret-token"})
        assert ok.status_code == 200 and ok.json()["tokens"] == ["<|bos|>", "1", "2", "3"]
        ok = client.post("/api/prompt", json=BODY, headers={"x-interp-token": "s3cret-token"})
        assert ok.status_code == 200
        page = client.get("/", params={"token": "s3cret-token"})  # the URL printed at start-up
        assert page.status_code == 200
        assert "interp_token=s3cret-token" in page.headers["set-cookie"]
        assert "HttpOnly" in page.headers["set-cookie"]
        # The page's scripts and requests then carry the cookie.
        assert client.get("/vendor/attention.js").status_code == 200
        assert client.post("/api/prompt", json=BODY).status_code == 200
    with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 5)) as local:
        assert local.get("/api/models").status_code == 401  # local requests too


def test_a_slow_request_does_not_stall_the_others(model):
    """While one model's forward pass holds its lock, other models and cached answers are
    served: the model work runs in worker threads, not on the event loop."""
    other = interp.load_model("shakespeare-char")
    app = create_app({ATTN: model, "shakespeare-char": other})
    worker = app.app.state.workers[ATTN]
    with BackgroundServer(app) as server, httpx.Client(base_url=server.url) as client:
        assert client.post("api/prompt", json={"model": ATTN, "prompt": "4 5"}).status_code == 200
        slow: list[httpx.Response] = []
        with worker.lock:  # as if a long forward pass of attn-only-2l were running
            thread = threading.Thread(
                target=lambda: slow.append(client.post("api/prompt", json=BODY, timeout=60))
            )
            thread.start()
            time.sleep(0.2)
            fast = client.post("api/prompt", json={"model": "shakespeare-char", "prompt": "To"})
            cached = client.post("api/attention", json={"model": ATTN, "prompt": "4 5", "layer": 0})
            assert fast.status_code == 200 and cached.status_code == 200
            assert not slow  # still waiting for the lock
        thread.join(60)
        assert slow[0].status_code == 200


def test_the_background_server_frees_its_port_when_stopped(model):
    server = BackgroundServer(create_app({ATTN: model})).start()
    assert server.url == f"http://127.0.0.1:{server.port}/"
    assert not port_is_free(server.port)
    response = httpx.get(server.url + "api/models")
    assert response.json()["models"][0]["name"] == ATTN
    server.stop()
    assert port_is_free(server.port) and not server.running


def test_notebook_dashboard_shows_an_iframe_and_stops(model):
    board = interp.viz.dashboard(model, prompt="1 2 </script> 3", height=500)
    try:
        assert board.running and board.url == f"http://127.0.0.1:{board.port}/"
        html = board._repr_html_()
        assert html.startswith(f'<iframe src="http://127.0.0.1:{board.port}/#model=attn-only-2l')
        assert "prompt=1%202%20%3C%2Fscript%3E%203" in html and 'height="500"' in html
        page = httpx.get(board.url)
        assert page.status_code == 200 and "interp dashboard" in page.text
    finally:
        board.stop()
    assert port_is_free(board.port)
    assert board._repr_html_() == "<p>The dashboard is stopped.</p>"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--model", ATTN, "--model", ATTN], "--model names a model twice"),
        (["--model", ATTN, "--sae", "no-such-sae"], "--sae 'no-such-sae' cannot be loaded"),
        (
            ["--model", ATTN, "--sae", "shakespeare-char-resid-l1"],
            "is for model 'shakespeare-char', which is not exactly one of the models served",
        ),
        (["--model", "no-such-model"], "unknown model 'no-such-model'"),
        (["--model", ATTN, "--port", "70000"], "--port 70000 is not a port number"),
    ],
)
def test_serve_usage_errors_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["serve", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_serve_reports_a_busy_port_as_exit_1(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        assert main(["serve", "--model", ATTN, "--port", str(port)]) == 1
    assert f"Cannot listen on 127.0.0.1:{port}" in capsys.readouterr().err
