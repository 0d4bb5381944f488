"""The attribution-graph viewer on long prompts, in headless Chromium (Playwright with the
system's chromium): graphs of shakespeare-char (``--chars`` characters of tinyshakespeare a
graph, one token a character; the model reads 128) traced with its shipped transcoders, and
``--graphs`` of them side by side as one graph of ``chars x graphs`` positions (the model's
context is 128 tokens, so a 512-position graph is four traced graphs of consecutive text,
their positions and node ids offset). For each: the nodes, edges and positions the page
draws, and the layout and render time the page records (``data-gv-layout-ms``: building,
pruning and laying out; ``data-gv-render-ms``: until the first frame after it is painted),
best and median of --repeats, against a budget (``--budget-ms``, layout plus first paint:
a page over it is reported as such). ``--out DIR`` keeps each page and a screenshot there.

    python benchmarks/bench_graph_view.py [--chars 128] [--graphs 4] [--out /tmp/shots]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import statistics
import tempfile
from pathlib import Path

from interp.circuits import ReplacementModel, attribute, graph_view
from interp.shipped import shipped_text_path
from interp.viz.graph_view import GraphView

MODEL, TRANSCODERS, START = "shakespeare-char", "shakespeare-char-transcoders", 1000


def traced(replacement: ReplacementModel, text: str, slug: str) -> dict:
    graph = attribute(text, replacement, batch_size=256)
    view = graph_view(graph, replacement, slug=slug)
    print(f"traced {slug}: {len(view.graph['nodes'])} nodes, {len(view.graph['links'])} edges")
    return {"graph": view.graph, "extras": view.extras}


def moved(node_id: str, offset: int) -> str:
    """A node id (which ends in its position) ``offset`` positions later."""
    head, _, pos = str(node_id).rpartition("_")
    return f"{head}_{int(pos) + offset}"


def side_by_side(parts: list[dict], slug: str) -> dict:
    """One graph JSON of ``parts`` laid end to end: positions (and the position that ends
    each node id) offset by the tokens before."""
    nodes, links, tokens = [], [], []
    for part in parts:
        graph, offset = part["graph"], len(tokens)

        nodes += [
            dict(n, node_id=moved(n["node_id"], offset), ctx_idx=n["ctx_idx"] + offset)
            for n in graph["nodes"]
        ]
        links += [
            dict(x, source=moved(x["source"], offset), target=moved(x["target"], offset))
            for x in graph["links"]
        ]
        tokens += graph["metadata"]["prompt_tokens"]
    metadata = dict(parts[0]["graph"]["metadata"], slug=slug, prompt_tokens=tokens)
    metadata["prompt"] = "".join(tokens)
    graph = {"metadata": metadata, "qParams": {}, "nodes": nodes, "links": links}
    return {"graph": graph, "extras": {"transcoder": parts[0]["extras"].get("transcoder")}}


def measure(browser, data: dict, folder: Path, name: str, repeats: int) -> dict:
    path = GraphView(data["graph"], data["extras"]).save(folder / f"{name}.html")
    layout, render = [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.goto(path.as_uri())
        page.wait_for_function(
            "() => (document.querySelector('.gv-root').getAttribute('data-gv-state') || '')"
            ".startsWith('ready')"
        )
        layout.append(float(page.get_attribute(".gv-root", "data-gv-layout-ms")))
        render.append(float(page.get_attribute(".gv-root", "data-gv-render-ms")))
        shown = f"{page.text_content('.gv-counts')} · {page.text_content('.gv-position-count')}"
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)
        page.close()
    return {"layout": layout, "render": render, "shown": shown}


def figures(ms: list[float]) -> str:
    return f"best {min(ms):.0f} ms, median {statistics.median(ms):.0f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chars", type=int, default=128)
    parser.add_argument("--graphs", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None, help="keep pages and screenshots here")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    parser.add_argument(
        "--budget-ms", type=float, default=2000.0, help="layout plus first paint, at most"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    text = gzip.decompress(Path(shipped_text_path("tinyshakespeare")).read_bytes()).decode()
    replacement = ReplacementModel.from_pretrained(MODEL, TRANSCODERS)
    n = args.chars
    parts = [
        traced(replacement, text[START + i * n : START + (i + 1) * n], f"{MODEL}-{n}-{i}")
        for i in range(args.graphs)
    ]
    cases = {f"graph-{n}": parts[0]}
    if args.graphs > 1:
        cases[f"graph-{n * args.graphs}"] = side_by_side(parts, f"{MODEL}-{n * args.graphs}")
    with tempfile.TemporaryDirectory() as scratch, sync_playwright() as playwright:
        folder = Path(args.out or scratch)
        folder.mkdir(parents=True, exist_ok=True)
        browser = playwright.chromium.launch(
            executable_path=args.chromium,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        for name, data in cases.items():
            result = measure(browser, data, folder, name, args.repeats)
            print(f"{name} ({len(data['graph']['metadata']['prompt_tokens'])} positions):")
            print(f"  shown: {result['shown']}")
            print(f"  layout {figures(result['layout'])}; painted {figures(result['render'])}")
            slowest = max(result["render"])
            verdict = "within" if slowest <= args.budget_ms else "OVER"
            print(f"  slowest paint {slowest:.0f} ms: {verdict} the {args.budget_ms:.0f} ms budget")
            if args.out:
                print(f"  screenshot {folder / (name + '.png')}")
        browser.close()


if __name__ == "__main__":
    main()
