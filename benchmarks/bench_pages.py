"""Page weight and speed in headless Chromium (Playwright with the system's chromium):

* a report on a 104-character shakespeare-char prompt: the bytes of the page and every file it
  loads, and the time from navigation until every view is drawn (the attention heads and each
  plotly figure);
* the dashboard's first load (a fresh browser context: nothing cached) until the page is
  ready, and until a prompt's every panel is drawn; the bytes it transferred;
* a head click on a 128-token prompt: from the click until the head's pattern is drawn.

Each figure is the best and the median of --repeats runs. Timings depend on the machine's
load; the targets (issue 24) are: report <= 2.5 MB and drawn < 3 s, dashboard < 1.5 s, head
click < 200 ms.

    python benchmarks/bench_pages.py [--repeats 5] [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import interp
from interp.serve import BackgroundServer, create_app
from interp.viz.report import write_report

REPORT_PROMPT = (
    "ROMEO: But soft, what light through yonder window breaks? It is the east, and Juliet "
    "is the sun. Arise!!"
)
MODEL = "shakespeare-char"


def launch(playwright, chromium: str):
    return playwright.chromium.launch(
        executable_path=chromium,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )


def figures(times: list[float]) -> str:
    return f"best {min(times):.3f} s, median {statistics.median(times):.3f} s"


def bench_report(browser, folder: Path, repeats: int) -> dict:
    model = interp.load_model(MODEL)
    path, analysis = write_report(model, REPORT_PROMPT, folder / "report.html")
    files = [path, *sorted((folder / "report_assets").iterdir())]
    weight = sum(f.stat().st_size for f in files)
    times = []
    for _ in range(repeats):
        context = browser.new_context(viewport={"width": 1200, "height": 900})
        page = context.new_page()
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector("#attention[data-drawn] .interp-pattern canvas", state="attached")
        page.wait_for_function("document.querySelectorAll('.main-svg').length >= 3")
        times.append(time.perf_counter() - start)
        context.close()
    return {
        "tokens": len(analysis.tokens),
        "bytes": weight,
        "files": {f.name: f.stat().st_size for f in files},
        "times": times,
    }


def bench_dashboard(browser, repeats: int) -> dict:
    model = interp.load_model(MODEL)
    prompt = (REPORT_PROMPT * 2)[:128]
    long_prompt = prompt if len(model.to_tokens(prompt)[0]) == 128 else prompt[:127]
    ready, drawn, clicks, transferred = [], [], [], []
    with BackgroundServer(create_app({MODEL: model})) as server:
        for _ in range(repeats):
            context = browser.new_context(viewport={"width": 1200, "height": 900})
            page = context.new_page()
            sizes: list[int] = []
            page.on(
                "response",
                lambda r, sizes=sizes: sizes.append(int(r.headers.get("content-length", 0))),
            )
            start = time.perf_counter()
            page.goto(server.url)
            page.wait_for_selector("body[data-ready='1']", state="attached")
            ready.append(time.perf_counter() - start)
            transferred.append(sum(sizes))
            context.close()
            context = browser.new_context(viewport={"width": 1200, "height": 900})
            page = context.new_page()
            start = time.perf_counter()
            page.goto(f"{server.url}#model={MODEL}&prompt={long_prompt}")
            page.wait_for_selector("body[data-ready='1']", state="attached")
            page.wait_for_selector("#head-grid .head", state="attached")
            page.wait_for_selector("body[data-busy='0']", state="attached")
            drawn.append(time.perf_counter() - start)
            for head in (1, 2):
                start = time.perf_counter()
                page.click(f"#head-grid .head[data-head='{head}']")
                page.wait_for_selector(f"#pattern [data-head-drawn='{head}']", state="attached")
                clicks.append(time.perf_counter() - start)
            context.close()
    return {
        "ready": ready,
        "drawn": drawn,
        "clicks": clicks,
        "transferred": transferred,
        "tokens": len(model.to_tokens(long_prompt)[0]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright, tempfile.TemporaryDirectory() as folder:
        browser = launch(playwright, args.chromium)
        report = bench_report(browser, Path(folder), args.repeats)
        dashboard = bench_dashboard(browser, args.repeats)
        browser.close()
    print(f"report ({len(REPORT_PROMPT)} characters, {report['tokens']} tokens):")
    print(f"  weight {report['bytes'] / 1e6:.2f} MB (target <= 2.5): {report['files']}")
    print(f"  open until every view is drawn: {figures(report['times'])} (target < 3 s)")
    print("dashboard:")
    print(f"  first load until ready: {figures(dashboard['ready'])} (target < 1.5 s)")
    print(f"    bytes on the wire {max(dashboard['transferred']) / 1e6:.2f} MB")
    print(
        f"  first load with a {dashboard['tokens']}-token prompt, every panel drawn: "
        f"{figures(dashboard['drawn'])}"
    )
    print(
        f"  head click on {dashboard['tokens']} tokens: {figures(dashboard['clicks'])} "
        "(target < 0.2 s)"
    )


if __name__ == "__main__":
    main()
