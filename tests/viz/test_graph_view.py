"""The attribution-graph viewer's page (interp.viz.graph_view): its structure, that token
text cannot end the data's script, the notebook and served forms, and `interp graph` end
to end on a tiny model with tiny transcoders. In Chromium: test_graph_view_browser.py."""

from __future__ import annotations

import json
import re

import pytest
import torch
from fastapi.testclient import TestClient

from interp import HookedTransformer, HookedTransformerConfig
from interp.viz.graph_view import GraphView, check_graph_json, served_graph_page
from tests.support.tolerances import tolerance

XSS_SCRIPT = "</script><script>window.__xss = 1</script>"
XSS_IMG = '"><img src=x onerror="window.__xss = 2">'


def node(node_id: str, feature_type: str, layer: str, pos: int, **fields) -> dict:
    """One node as create_graph_files writes it (circuit-tracer's frontend Node)."""
    return {
        "node_id": node_id, "feature": fields.pop("feature", 0), "layer": layer,
        "ctx_idx": pos, "feature_type": feature_type, "token_prob": 0.0,
        "is_target_logit": False, "run_idx": 0, "reverse_ctx_idx": 0, "jsNodeId": node_id,
        "clerp": "", "influence": None, "activation": None, **fields,
    }  # fmt: skip


def hand_graph(tokens=("<bos>", " cat", XSS_SCRIPT, "\n", XSS_IMG)) -> dict:
    """A graph JSON in create_graph_files's format, written by hand: 2 layers, a feature
    per layer and position from 1, an error node, one token node a position and 2 logits."""
    n = len(tokens)
    nodes = [node(f"E_{10 + p}_{p}", "embedding", "E", p, feature=p, influence=0.5 + p / 100)
             for p in range(n)]  # fmt: skip
    features = []
    for layer in (0, 1):
        for p in range(1, n):
            influence = 0.05 * (1 + layer + p)
            nodes.append(
                node(f"{layer}_{3 + p}_{p}", "cross layer transcoder", str(layer), p,
                     influence=influence, activation=1.0 + p, clerp=XSS_IMG if p == 2 else "")
            )  # fmt: skip
            features.append(nodes[-1]["node_id"])
    nodes.append(node(f"0_-1_{n - 1}", "mlp reconstruction error", "0", n - 1, influence=0.3))
    logits = []
    for i, (vocab, word, prob) in enumerate(((7, XSS_SCRIPT, 0.6), (8, " dog", 0.3))):
        logits.append(f"3_{vocab}_{n - 1}")
        nodes.append(
            node(logits[-1], "logit", "3", n - 1, feature=vocab, token_prob=prob,
                 is_target_logit=i == 0, clerp=f'Output "{word}" (p={prob:.3f})')
        )  # fmt: skip
    links = []
    for p in range(1, n):
        links.append({"source": f"E_{10 + p}_{p}", "target": f"0_{3 + p}_{p}", "weight": 0.5 * p})
        links.append({"source": f"0_{3 + p}_{p}", "target": f"1_{3 + p}_{p}", "weight": -0.2 * p})
        for i, logit in enumerate(logits):
            weight = 0.1 * p * (1 if i == 0 else -1)
            links.append({"source": f"1_{3 + p}_{p}", "target": logit, "weight": weight})
    links.append({"source": f"0_-1_{n - 1}", "target": logits[0], "weight": 0.05})
    metadata = {
        "slug": "hand", "scan": "tiny", "transcoder_list": [], "prompt_tokens": list(tokens),
        "prompt": "".join(tokens), "node_threshold": 0.8, "schema_version": 1,
    }  # fmt: skip
    q_params = {"pinnedIds": [], "supernodes": [], "linkType": "both", "clickedId": "",
                "sg_pos": ""}  # fmt: skip
    return {"metadata": metadata, "qParams": q_params, "nodes": nodes, "links": links}


def embedded_data(html: str) -> dict:
    """The JSON the page's data script holds, as the browser's JSON.parse reads it."""
    found = re.findall(r"<script type='application/json' class='gv-data'>(.*?)</script>", html)
    assert len(found) == 1, "one data script"
    return json.loads(found[0])


def test_page_is_self_contained_and_holds_the_graph():
    data = hand_graph()
    html = GraphView(data, {"features": {"0_5": {"activations": [[2, 3.0]]}}}).to_html()
    assert html.startswith("<!DOCTYPE html>")
    assert embedded_data(html) == {
        "graph": data,
        "extras": {"features": {"0_5": {"activations": [[2, 3.0]]}}},
    }
    assert "InterpGraphView" in html and ".gv-root" in html  # script and style inlined
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", html), "nothing fetched"
    urls = set(re.findall(r"https?://[^\s\"']*", html))
    assert urls == {"http://www.w3.org/2000/svg"}, urls  # the SVG namespace, never fetched


def test_token_text_cannot_leave_the_data_script():
    html = GraphView(hand_graph()).to_html()
    assert XSS_SCRIPT not in html and "<img" not in html
    start = html.index("class='gv-data'>") + len("class='gv-data'>")
    data_text = html[start : html.index("</script>", start)]
    assert not set("<>&") & set(data_text)
    assert "\\u003c/script\\u003e" in data_text


def test_notebook_display_and_bad_input():
    view = GraphView(hand_graph())
    cell = view._repr_html_()
    assert cell.count("<script") == 2 and "<style>" in cell  # data + viewer, no page
    assert "16 nodes" in repr(view) and "17 links" in repr(view)
    ids = [re.search(r"id='(interp-graph-\w+)'", v._repr_html_()).group(1) for v in (view, view)]
    assert ids[0] != ids[1], "each display renders into its own element"
    with pytest.raises(ValueError, match="no nodes, links"):
        check_graph_json({"metadata": {}})
    with pytest.raises(ValueError, match="is a dict"):
        GraphView([1, 2])


def test_served_pages_load_only_the_servers_script():
    from interp.serve import create_app

    cfg = HookedTransformerConfig(n_layers=1, d_model=8, n_heads=1, d_vocab=10, n_ctx=8)
    app = create_app({"m": HookedTransformer(cfg)}, graphs={"hand": hand_graph()})
    with TestClient(app, base_url="http://127.0.0.1", client=("127.0.0.1", 50000)) as client:
        page = client.get("/graph/hand")
        assert page.status_code == 200
        assert "script-src 'self'" in page.headers["content-security-policy"]
        scripts = re.findall(r"<script\b[^>]*>", page.text)
        assert scripts == [
            "<script type='application/json' class='gv-data'>",
            "<script src='/graph/viewer.js'>",
        ]
        assert embedded_data(page.text)["graph"] == hand_graph()
        script = client.get("/graph/viewer.js")
        assert script.status_code == 200 and "InterpGraphView" in script.text
        picker = client.get("/graph")
        assert "class='gv-file'" in picker.text and "href='/graph/hand'" in picker.text
        missing = client.get("/graph/other")
        assert missing.status_code == 404 and "hand" in missing.json()["error"]
    assert "<script src='x.js'>" in served_graph_page("x.js")


def test_interp_serve_graph_files(tmp_path, capsys):
    from interp.cli import main
    from interp.serve.cli import graph_views

    path = tmp_path / "romeo.json"
    path.write_text(json.dumps(hand_graph()), encoding="utf-8")
    views = graph_views([str(path)])
    assert list(views) == ["romeo"] and views["romeo"].graph == hand_graph()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "romeo.json").write_text("{}", encoding="utf-8")
    for paths, message in (
        ([str(tmp_path / "missing.json")], "cannot read"),
        ([str(path), str(tmp_path / "other" / "romeo.json")], "two files of the same name"),
        ([str(tmp_path / "other" / "romeo.json")], "has no metadata, nodes, links"),
    ):
        argv = ["serve", "--model", "attn-only-2l", "--port", "0"]
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, *(f"--graph={p}" for p in paths)])
        assert exit_info.value.code == 2 and message in capsys.readouterr().err


# ------------------------------------------------------------------ end to end
@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """A tiny GPT-2-tokenizer model and skip transcoders for it, saved as folders."""
    from tests.circuits.test_circuits import tiny_transcoders

    folder = tmp_path_factory.mktemp("graph_cli")
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=2, d_mlp=64, d_vocab=50257, n_ctx=32, seed=0
    )
    HookedTransformer(cfg, tokenizer="gpt2").save(folder / "model")
    torch.manual_seed(0)  # the same transcoders whatever ran before
    tiny_transcoders("gemma2", skip=True, b_enc=0.0).save(folder / "tc")  # hook_resid_mid
    return folder


CONTEXT_TEXT = "The cat sat on the mat. A dog ran in the park, and the cat sat still. " * 12


def test_interp_graph_writes_the_viewer(tiny_folders, tmp_path, capsys):
    from interp.cli import main

    out, json_dir, text = tmp_path / "graph.html", tmp_path / "json", tmp_path / "text.txt"
    text.write_text(CONTEXT_TEXT, encoding="utf-8")
    argv = ["graph", "--model", str(tiny_folders / "model"), "--transcoders",
            str(tiny_folders / "tc"), "--prompt", "The cat sat on the mat",
            "--out", str(out), "--max-feature-nodes", "20", "--batch-size", "64",
            "--slug", "cat", "--json-dir", str(json_dir), "--contexts-data", str(text)]  # fmt: skip
    assert main(argv) == 0
    assert "graph written to" in capsys.readouterr().out
    data = embedded_data(out.read_text(encoding="utf-8"))
    graph = data["graph"]
    assert graph == json.loads((json_dir / "cat.json").read_text())  # create_graph_files's
    assert (json_dir / "graph-metadata.json").is_file()
    assert graph["metadata"]["slug"] == "cat" and graph["metadata"]["node_threshold"] == 0.8
    kinds = {n["feature_type"] for n in graph["nodes"]}
    assert {"embedding", "logit", "cross layer transcoder"} <= kinds
    assert graph["links"], "edges"
    ids = {n["node_id"] for n in graph["nodes"]}
    assert all(link["source"] in ids and link["target"] in ids for link in graph["links"])
    shown = {
        "_".join(n["node_id"].split("_")[:2])
        for n in graph["nodes"]
        if n["feature_type"] == "cross layer transcoder"
    }
    extras = data["extras"]["features"]
    assert set(extras) == shown
    for key in shown:  # every feature shown: its activations and decoder logits
        assert extras[key]["activations"] and len(extras[key]["promoted"]) == 8
        assert all(value > 0 for _, value in extras[key]["activations"])
    with_contexts = [extras[key]["contexts"] for key in shown if "contexts" in extras[key]]
    assert with_contexts, "features active on the text have top contexts"
    for contexts in with_contexts:
        values = [c["value"] for c in contexts]
        assert values == sorted(values, reverse=True) and len(values) <= 5
        for c in contexts:
            assert c["acts"][c["index"]] == c["value"] == max(c["acts"])
            assert "".join(c["tokens"]).removeprefix("<|endoftext|>") in CONTEXT_TEXT


def test_interp_graph_sparse_threshold(tiny_folders, tmp_path, capsys):
    """--sparse-threshold 0 stores the graph sparse and writes the dense graph's JSON; a
    share of 1 or more is a usage error."""
    from interp.cli import main

    base = ["graph", "--model", str(tiny_folders / "model"), "--transcoders",
            str(tiny_folders / "tc"), "--prompt", "The cat sat", "--max-feature-nodes", "20",
            "--batch-size", "64", "--slug", "cat"]  # fmt: skip
    written = {}
    for name, extra in (("dense", []), ("sparse", ["--sparse-threshold", "0"])):
        json_dir = tmp_path / name
        argv = [*base, "--out", str(tmp_path / f"{name}.html"), "--json-dir", str(json_dir)]
        assert main([*argv, *extra]) == 0
        written[name] = json.loads((json_dir / "cat.json").read_text())
    # The same nodes; their influence sums a row's edges in another order (sparse products).
    dense_nodes, sparse_nodes = written["dense"]["nodes"], written["sparse"]["nodes"]
    assert len(sparse_nodes) == len(dense_nodes)
    sparse_influence = torch.tensor([node.pop("influence") or 0.0 for node in sparse_nodes])
    dense_influence = torch.tensor([node.pop("influence") or 0.0 for node in dense_nodes])
    assert sparse_nodes == dense_nodes
    torch.testing.assert_close(
        sparse_influence, dense_influence, **tolerance(torch.float32, reduction=len(dense_nodes))
    )
    assert written["sparse"]["links"] == written["dense"]["links"]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--out", str(tmp_path / "g.html"), "--sparse-threshold", "1"])
    assert exit_info.value.code == 2 and "--sparse-threshold" in capsys.readouterr().err


def test_interp_graph_bad_input_is_a_usage_error(tiny_folders, tmp_path, capsys):
    from interp.cli import main

    base = ["graph", "--model", str(tiny_folders / "model"), "--prompt", "The cat"]
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--transcoders", str(tmp_path), "--out", str(tmp_path / "g.html")])
    assert exit_info.value.code == 2 and "--transcoders" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--transcoders", str(tiny_folders / "tc"), "--out", str(tmp_path),
              "--node-threshold", "0.5"])  # fmt: skip
    assert exit_info.value.code == 2 and "is a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--transcoders", str(tiny_folders / "tc"), "--out", "g.html",
              "--edge-threshold", "1.5"])  # fmt: skip
    assert exit_info.value.code == 2 and "between 0 and 1" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main([*base, "--transcoders", str(tiny_folders / "tc"), "--out", "g.html",
              "--contexts-data", str(tmp_path / "missing.txt")])  # fmt: skip
    assert exit_info.value.code == 2 and "cannot read --contexts-data" in capsys.readouterr().err


def test_graph_view_of_a_graph_object(tiny_folders):
    from interp.circuits import ReplacementModel, attribute
    from interp.circuits.view import graph_view

    torch.manual_seed(0)
    replacement = ReplacementModel.from_pretrained(
        str(tiny_folders / "model"), str(tiny_folders / "tc")
    )
    graph = attribute("A cat", replacement, batch_size=64, max_feature_nodes=10)
    view = graph_view(graph, scan="tiny", node_threshold=0.5, edge_threshold=0.9)  # no model
    assert view.graph["metadata"]["node_threshold"] == 0.5
    assert all("promoted" not in extra for extra in view.extras["features"].values())
    again = graph_view(view.graph)  # the JSON itself: no extras
    assert again.graph == view.graph and again.extras is None


@pytest.mark.parametrize("shape, kind", [("gemma2", "set"), ("llama", "set"), ("llama", "clt")])
def test_batched_transcoder_activations_equal_get_activations(shape, kind):
    """The top contexts' batched forward reads what get_activations reads, prompt by prompt
    (hook points and circuit-tracer's mlp.hook_in; per-layer and cross-layer transcoders)."""
    from interp.circuits import ReplacementModel
    from interp.circuits.view import transcoder_activations
    from tests.circuits.test_circuits import tiny_clt, tiny_model, tiny_transcoders

    torch.manual_seed(0)
    transcoders = tiny_clt(shape, True) if kind == "clt" else tiny_transcoders(shape, True)
    replacement = ReplacementModel.from_model(tiny_model(shape), transcoders)
    windows = torch.randint(0, 48, (3, 7))
    batched = torch.stack(transcoder_activations(replacement, windows), dim=1)
    for window, acts in zip(windows, batched, strict=True):  # acts: [n_layers, seq, d_tc]
        _, expected = replacement.get_activations(window[None])
        torch.testing.assert_close(acts, expected.to(acts.dtype), rtol=1e-5, atol=1e-5)
    assert batched[:, :, 0].abs().max() == 0 and batched.abs().max() > 0


@pytest.mark.parametrize("kind", ["set", "clt"])
def test_the_viewer_is_told_per_layer_from_cross_layer_transcoders(kind):
    """create_graph_files's JSON says "cross layer transcoder" for both kinds (as
    circuit-tracer's does): the extras say which, so the viewer names features right."""
    from interp.circuits import ReplacementModel
    from interp.circuits.view import feature_extras, transcoder_kind
    from tests.circuits.test_circuits import tiny_clt, tiny_model, tiny_transcoders

    torch.manual_seed(0)
    transcoders = tiny_clt("llama", True) if kind == "clt" else tiny_transcoders("llama", True)
    replacement = ReplacementModel.from_model(tiny_model("llama"), transcoders)
    expected = "cross-layer" if kind == "clt" else "per-layer"
    assert transcoder_kind(replacement) == expected
    assert feature_extras({"nodes": []}, model=replacement)["transcoder"] == expected
    assert "transcoder" not in feature_extras({"nodes": []})  # no model: not known
