"""The attribution-graph viewer in headless Chromium (Playwright, the system's chromium):
a graph renders (nodes and edges), hover and click show a feature, the thresholds prune,
pinned nodes stay, hostile token text stays text, no console error, and no request leaves
the page's origin (each is blocked and recorded, and the test fails if one was tried).

Screenshots land in the test's tmp_path (set INTERP_SCREENSHOTS=DIR to keep them there)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from interp import HookedTransformer, HookedTransformerConfig
from interp.viz.graph_view import GraphView
from tests.conftest import CHROMIUM, NEEDS_CHROMIUM
from tests.viz.test_graph_view import (  # noqa: F401 (tiny_folders: a fixture)
    CONTEXT_TEXT,
    XSS_IMG,
    XSS_SCRIPT,
    hand_graph,
    tiny_folders,
)

playwright_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
pytestmark = NEEDS_CHROMIUM
N_NODES, N_LINKS = 16, 17  # hand_graph()'s


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


def watched_page(browser, origin: str):
    """A page that records console errors, page errors, dialogs and every request that
    does not start with ``origin`` (aborted); ``page.problems`` lists them."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console: {m.text}") if m.type == "error" else 0)
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("dialog", lambda dialog: problems.append(f"dialog: {dialog.message}"))
    page.on(
        "request",
        lambda r: problems.append(f"request: {r.url}") if not r.url.startswith(origin) else 0,
    )
    page.route(lambda url: not url.startswith(origin), lambda route: route.abort())
    page.problems = problems
    return page


@pytest.fixture
def file_page(browser):
    page = watched_page(browser, "file://")
    yield page
    page.context.close()
    assert not page.problems, page.problems


def screenshot(page, tmp_path: Path, name: str) -> None:
    folder = Path(os.environ.get("INTERP_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


def set_slider(page, name: str, value: float) -> None:
    """Move a threshold slider and wait for the re-pruning it schedules."""
    page.fill(f"input[name={name}]", str(value))
    page.dispatch_event(f"input[name={name}]", "input")
    page.wait_for_function("() => !document.querySelector('.gv-root').gvView.pending")


def shown(page, selector: str) -> int:
    return page.locator(f"{selector}:not(.gv-hidden)").count()


def test_graph_renders_hover_click_prune_and_pin(file_page, tmp_path):
    page = file_page
    page.goto(GraphView(hand_graph()).save(tmp_path / "hand.html").as_uri())
    page.wait_for_selector(".gv-node")
    assert shown(page, ".gv-node") == N_NODES and page.locator(".gv-edge").count() == N_LINKS
    assert page.text_content(".gv-counts") == f"{N_NODES} of {N_NODES} nodes · 17 of 17 edges"
    labels = page.locator(".gv-token").all_text_contents()
    assert labels[1] == "␣cat" and labels[3] == "↵"  # whitespace made visible
    feature = page.locator(".gv-node[data-node-id='1_7_4']")
    feature.hover()
    tip = page.text_content(".gv-tip")
    assert "Feature 7 of layer 1 at position 4" in tip and "activation5.000" in tip
    feature.click()
    details = page.text_content(".gv-details")
    assert "Strongest inputs" in details and "L0 #7 @4" in details
    assert "Direct effects on the logits" in details and "+0.400" in details
    assert page.locator(".gv-edge.gv-edge-on").count() == 3  # 1 in, 2 out
    screenshot(page, tmp_path, "graph-view-clicked")

    page.click(".gv-details .gv-pin")  # pin 1_7_4, then prune hard
    assert page.text_content(".gv-pin-list") == "L1 #7 @4 " + XSS_IMG.replace(" ", "␣") + "×"
    set_slider(page, "node-threshold", 0.05)
    set_slider(page, "edge-threshold", 0.3)
    assert page.locator(".gv-edge").count() < N_LINKS
    assert shown(page, ".gv-node") < N_NODES
    assert page.locator(".gv-node[data-node-id='1_7_4']:not(.gv-hidden)").count() == 1
    assert page.locator(".gv-node.gv-is-pinned").count() == 1
    screenshot(page, tmp_path, "graph-view-pruned")
    page.click(".gv-unpin")
    assert page.locator(".gv-node[data-node-id='1_7_4']:not(.gv-hidden)").count() == 0


def test_hostile_token_text_stays_text(file_page, tmp_path):
    page = file_page
    page.goto(GraphView(hand_graph()).save(tmp_path / "xss.html").as_uri())
    page.wait_for_selector(".gv-node")
    assert page.evaluate("window.__xss") is None
    assert page.locator("img").count() == 0
    assert page.locator(".gv-root script").count() == 1  # only the data script
    prompt = page.text_content(".gv-prompt")
    assert XSS_SCRIPT.replace(" ", "␣") in prompt and XSS_IMG.replace(" ", "␣") in prompt
    page.click(".gv-node[data-node-id='0_5_2']")  # its clerp is XSS_IMG
    assert XSS_IMG in page.text_content(".gv-detail-title")
    page.click(".gv-node[data-node-id='3_7_4']")  # the logit whose token is XSS_SCRIPT
    assert f'Output "{XSS_SCRIPT}"' in page.text_content(".gv-detail-title")
    assert page.evaluate("window.__xss") is None and page.locator("img").count() == 0


def test_a_traced_graph_with_extras(file_page, tiny_folders, tmp_path):  # noqa: F811
    from interp.cli import main

    out, text = tmp_path / "traced.html", tmp_path / "text.txt"
    text.write_text(CONTEXT_TEXT, encoding="utf-8")
    argv = ["graph", "--model", str(tiny_folders / "model"), "--transcoders",
            str(tiny_folders / "tc"), "--prompt", "The cat sat on the mat.\nIt sat",
            "--out", str(out), "--max-feature-nodes", "30", "--batch-size", "64",
            "--contexts-data", str(text)]  # fmt: skip
    assert main(argv) == 0
    page = file_page
    page.goto(out.as_uri())
    page.wait_for_selector(".gv-node")
    data = json.loads(page.text_content("script.gv-data"))
    assert shown(page, ".gv-node") == len(data["graph"]["nodes"])
    assert page.locator(".gv-edge").count() == len(data["graph"]["links"])
    features = data["extras"]["features"]
    ids = [n["node_id"] for n in data["graph"]["nodes"]]
    node_id = next(  # a feature with top contexts and an id of its own
        i
        for i in ids
        if ids.count(i) == 1 and features.get("_".join(i.split("_")[:2]), {}).get("contexts")
    )
    feature = page.locator(f".gv-node[data-node-id='{node_id}']")
    feature.hover()
    assert "top context" in page.text_content(".gv-tip")
    feature.click()
    details = page.text_content(".gv-details")
    assert "Activation on the prompt" in details and "Decoder logit weights" in details
    assert "Top contexts" in details and page.locator(".gv-details .gv-top").count() >= 1
    screenshot(page, tmp_path, "graph-view-traced")


def test_served_graph_and_file_picker(browser, tmp_path):
    from interp.serve import BackgroundServer, create_app

    cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_heads=1, d_vocab=10, n_ctx=8)
    app = create_app({"m": HookedTransformer(cfg)}, graphs={"hand": hand_graph()})
    with BackgroundServer(app) as server:
        page = watched_page(browser, server.url)
        page.goto(server.url + "graph/hand")  # under the dashboard's CSP: no inline script
        page.wait_for_selector(".gv-node")
        assert shown(page, ".gv-node") == N_NODES and page.locator(".gv-edge").count() == N_LINKS
        page.click(".gv-node[data-node-id='1_7_4']")
        assert "Strongest inputs" in page.text_content(".gv-details")
        assert page.locator("img").count() == 0  # the hostile tokens stayed text here too
        assert XSS_SCRIPT.replace(" ", "␣") in page.text_content(".gv-prompt")

        page.goto(server.url + "graph")
        assert page.locator("a[href='/graph/hand']").count() == 1
        graph_file = tmp_path / "picked.json"
        graph_file.write_text(json.dumps(hand_graph(tokens=("a", "b", "c"))), encoding="utf-8")
        page.set_input_files("input.gv-file", str(graph_file))
        page.wait_for_selector("#gv-picked .gv-node")
        assert page.locator("#gv-picked .gv-token").all_text_contents() == ["a", "b", "c"]
        assert page.text_content("#gv-picked-status") == "picked.json"
        screenshot(page, tmp_path, "graph-view-served-picker")
        page.context.close()
        assert not page.problems, page.problems


def test_a_shared_node_id_is_told_apart_and_flagged(file_page, tmp_path):
    """circuit-tracer 0.5.0 names the error node of layer 1 at position 4 "0_1_4", the id of
    feature 1 of layer 0 there. create_graph_files lists a target's links by source in
    graph order (features, errors, tokens): after another error it is the error, before a
    feature the feature; into layer 1 only the layer-0 feature can lead; a target is never
    the error (errors have no inputs)."""
    from tests.viz.test_graph_view import node

    data = hand_graph()
    data["nodes"] += [
        node("0_1_4", "cross layer transcoder", "0", 4, influence=0.1, activation=1.0),
        node("0_1_4", "mlp reconstruction error", "1", 4, influence=0.1),
    ]
    data["links"] += [
        {"source": "0_1_4", "target": "1_6_3", "weight": 0.31},  # a row below: the feature
        {"source": "0_-1_4", "target": "3_7_4", "weight": 0.01},  # (another error, then)
        {"source": "0_1_4", "target": "3_7_4", "weight": 0.32},  # the error
        {"source": "0_1_4", "target": "3_8_4", "weight": 0.33},  # (then a feature:)
        {"source": "1_7_4", "target": "3_8_4", "weight": 0.02},  # the feature
        {"source": "0_1_4", "target": "1_7_4", "weight": 0.34},  # a row below: the feature
        {"source": "E_14_4", "target": "0_1_4", "weight": 0.35},  # an error has no input
    ]
    page = file_page
    page.goto(GraphView(data).save(tmp_path / "shared.html").as_uri())
    page.wait_for_selector(".gv-node")
    assert page.text_content(".gv-warning").startswith("1 node id(s) belong to two nodes")
    assert "0 edge(s) from such an id could not be told apart" in page.text_content(".gv-warning")
    page.click(".gv-node.gv-feature[data-node-id='0_1_4']")
    details = page.text_content(".gv-details")
    for weight in ("+0.310", "+0.330", "+0.340", "+0.350"):
        assert weight in details, weight
    assert "+0.320" not in details
    page.click(".gv-node.gv-error[data-node-id='0_1_4']")
    details = page.text_content(".gv-details")
    assert "+0.320" in details and "+0.310" not in details and "+0.350" not in details


def test_two_notebook_cells_each_render(file_page, tmp_path):
    """Two displays in one notebook are two cells of one page: each carries the viewer's
    script, which defines the viewer once and renders every view not yet drawn."""
    from interp.viz.html import html_page

    cells = (
        GraphView(hand_graph())._repr_html_() + GraphView(hand_graph(("a", "b", "c")))._repr_html_()
    )
    path = tmp_path / "notebook.html"
    path.write_text(html_page("two cells", cells), encoding="utf-8")
    page = file_page
    page.goto(path.as_uri())
    page.wait_for_selector(".gv-node")
    roots = page.locator(".gv-root[data-gv-rendered]")
    assert roots.count() == 2
    assert roots.nth(0).locator(".gv-node").count() == N_NODES
    assert roots.nth(1).locator(".gv-token").all_text_contents() == ["a", "b", "c"]


def test_shared_ids_of_a_traced_graph_get_the_adjacency_s_edges(file_page, tiny_folders, tmp_path):  # noqa: F811
    """On a real graph with a shared id, each of the two nodes shows exactly the edges the
    adjacency matrix gives it (a weight names its source: feature or error column)."""
    from interp.circuits import ReplacementModel, attribute, graph_view

    replacement = ReplacementModel.from_pretrained(
        str(tiny_folders / "model"), str(tiny_folders / "tc")
    )
    graph = attribute("A cat sat", replacement, batch_size=64)
    view = graph_view(graph, replacement, scan="tiny", node_threshold=1.0, edge_threshold=1.0)
    ids = [n["node_id"] for n in view.graph["nodes"]]
    shared = sorted({i for i in ids if ids.count(i) == 2})
    assert shared == ["0_1_3"], "the error of layer 1 at 3 and feature 1 of layer 0 there"
    page = file_page
    page.goto(view.save(tmp_path / "shared.html").as_uri())
    page.wait_for_selector(".gv-node")
    drawn = page.evaluate(
        """() => document.querySelector('.gv-root').gvView.model.links
            .map(l => [l.source.node_id, l.source.kind, l.target.node_id, l.weight])"""
    )
    n_features, n_pos = len(graph.selected_features), graph.n_pos
    active = graph.active_features[graph.selected_features].tolist()  # [n, 3]
    adjacency = graph.adjacency_matrix
    kinds = {kind for source, kind, _, _ in drawn if source in shared}
    assert kinds == {"feature", "error"}, "edges from both nodes of the shared id"
    for node_id in shared:
        _, layer, pos = (int(part) for part in node_id.split("_"))
        feature_column = active.index([0, pos, layer])  # feature `layer` of layer 0
        error_column = n_features + layer * n_pos + pos
        for source, kind, target, weight in drawn:
            if source != node_id:
                continue
            column = feature_column if kind == "feature" else error_column
            closest = (adjacency[:, column] - weight).abs().min()
            assert closest < 1e-6 * adjacency.abs().max(), (node_id, kind, target, weight)


@pytest.mark.parametrize("transcoder", ["per-layer", "cross-layer", None])
def test_nodes_are_named_by_kind_and_logits_as_the_output(file_page, tmp_path, transcoder):
    """hand_graph has 2 layers: its logits sit at the JSON's layer "3" and its features say
    "cross layer transcoder" whatever the transcoders were; the page says what they are."""
    extras = {"features": {}} | ({"transcoder": transcoder} if transcoder else {})
    page = file_page
    page.goto(GraphView(hand_graph(), extras).save(tmp_path / "kinds.html").as_uri())
    page.wait_for_selector(".gv-node")
    page.click(".gv-node[data-node-id='1_7_4']")
    facts = page.text_content(".gv-facts")
    kind = f"{transcoder} transcoder feature" if transcoder else "transcoder feature"
    assert f"type{kind}layer1" in facts and "cross layer" not in facts
    page.click(".gv-node[data-node-id='3_7_4']")  # a logit
    facts = page.text_content(".gv-facts")
    assert "typelogit (the model's output)layeroutput (after layer 1)" in facts
    assert "layer3" not in facts
    page.locator(".gv-node[data-node-id='3_8_4']").hover()
    assert "layeroutput (after layer 1)" in page.text_content(".gv-tip")
    page.click(".gv-node[data-node-id='0_-1_4']")  # the error node
    assert "typeMLP reconstruction errorlayer0" in page.text_content(".gv-facts")
    screenshot(page, tmp_path, f"graph-view-kinds-{transcoder}")
