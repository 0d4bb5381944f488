"""Load on ``interp serve``: concurrent clients sending mixed requests to the shipped models.

Starts the dashboard app (both shipped models) on a free 127.0.0.1 port in this process,
then ``--clients`` threads each send their share of ``--requests`` requests over HTTP, drawn
at random from the page's mix: prompt summaries, attention by layer and by head, the logit
lens, direct logit attribution, head scores (over a pool of prompts, so the forward cache
both hits and misses) and a few patching jobs followed to the end. Prints p50/p95 latency
per kind, the error count, and the process's resident memory before and after.

    python benchmarks/bench_serve.py                     # 8 clients, 400 requests
    python benchmarks/bench_serve.py --smoke             # a few seconds (CI)
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import threading
import time
import urllib.error
import urllib.request
from collections import defaultdict

import interp
from interp.serve import BackgroundServer, create_app

SYMBOLS = [str(n) for n in range(2, 500)]
CHARS = "abcdefghijklmnopqrstuvwxyz "


def rss_mb() -> float:
    """The process's current resident set size in MB (from /proc), or its peak elsewhere."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize() / 2**20
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def prompt_pool(rng: random.Random, n: int) -> dict[str, list[tuple[str, str]]]:
    """(prompt, corrupted prompt) pairs of the same length in tokens, per model."""
    pairs = {"attn-only-2l": [], "shakespeare-char": []}
    for _ in range(n):
        seq = rng.sample(SYMBOLS, 10)
        clean = " ".join(seq + ["501"] + seq)
        pairs["attn-only-2l"].append((clean, " ".join(seq + ["77"] + seq)))
        text = "".join(rng.choice(CHARS) for _ in range(40))
        pairs["shakespeare-char"].append((text, text[:-1] + ("e" if text[-1] != "e" else "a")))
    return pairs


def request(base: str, method: str, path: str, body: dict | None = None) -> dict:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("content-type", "application/json")
    with urllib.request.urlopen(req, timeout=120) as response:
        return json.loads(response.read())


def one_request(base: str, rng: random.Random, pairs, n_layers: dict, n_heads: dict):
    """One request of a random kind; returns its kind."""
    model = rng.choice(list(pairs))
    prompt, corrupted = rng.choice(pairs[model])
    body = {"model": model, "prompt": prompt}
    kind = rng.choices(
        ["prompt", "attention", "head", "logit_lens", "attribution", "head_scores", "patching"],
        weights=[3, 3, 3, 2, 2, 2, 1],
    )[0]
    if kind == "attention":
        request(base, "POST", "api/attention", body | {"layer": rng.randrange(n_layers[model])})
    elif kind == "head":
        layer, head = rng.randrange(n_layers[model]), rng.randrange(n_heads[model])
        request(base, "POST", "api/attention", body | {"layer": layer, "head": head})
    elif kind == "patching":
        job = request(base, "POST", "api/patching", body | {"corrupted": corrupted})
        while job["state"] == "running":
            time.sleep(0.01)
            job = request(base, "GET", f"api/jobs/{job['id']}")
        if job["state"] != "done":
            raise RuntimeError(f"patching job ended {job['state']}: {job['error']}")
    else:
        request(base, "POST", f"api/{kind}", body)
    return kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--prompts", type=int, default=12, help="distinct prompts per model")
    parser.add_argument("--smoke", action="store_true", help="2 clients, 30 requests")
    args = parser.parse_args()
    if args.smoke:
        args.clients, args.requests, args.prompts = 2, 30, 3
    rng = random.Random(0)
    models = {name: interp.load_model(name) for name in ("attn-only-2l", "shakespeare-char")}
    n_layers = {name: m.cfg.n_layers for name, m in models.items()}
    n_heads = {name: m.cfg.n_heads for name, m in models.items()}
    pairs = prompt_pool(rng, args.prompts)
    latencies: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    lock = threading.Lock()

    with BackgroundServer(create_app(models)) as server:
        base = server.url
        # Warm up: every prompt's forward pass and analyses cached, every code path run once,
        # so the memory measured next is what serving costs, not what caching fills.
        for model, prompts in pairs.items():
            for prompt, _ in prompts:
                for kind in ("head_scores", "logit_lens", "attribution"):
                    request(base, "POST", f"api/{kind}", {"model": model, "prompt": prompt})
        warm = random.Random(1)
        for _ in range(2 * args.clients):
            one_request(base, warm, pairs, n_layers, n_heads)
        rss_start = rss_mb()

        def client(seed: int, count: int) -> None:
            client_rng = random.Random(seed)
            for _ in range(count):
                start = time.perf_counter()
                try:
                    kind = one_request(base, client_rng, pairs, n_layers, n_heads)
                except (urllib.error.URLError, RuntimeError, OSError) as error:
                    with lock:
                        errors.append(f"{type(error).__name__}: {error}")
                    continue
                with lock:
                    latencies[kind].append(time.perf_counter() - start)

        shares = [args.requests // args.clients] * args.clients
        shares[0] += args.requests - sum(shares)
        threads = [threading.Thread(target=client, args=(i, n)) for i, n in enumerate(shares)]
        started = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - started
        rss_end = rss_mb()

    def percentile(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000

    total = sum(len(v) for v in latencies.values())
    print(f"{args.clients} clients, {total} requests in {wall:.1f} s ({total / wall:.0f}/s)")
    print(f"{'kind':<14}{'n':>5}{'p50 ms':>10}{'p95 ms':>10}")
    others = []
    for kind in sorted(latencies):
        values = latencies[kind]
        if kind != "patching":
            others += values
        if len(values) >= 2:
            p50, p95 = percentile(values, 50), percentile(values, 95)
            print(f"{kind:<14}{len(values):>5}{p50:>10.1f}{p95:>10.1f}")
    if len(others) >= 2:
        p50, p95 = percentile(others, 50), percentile(others, 95)
        print(f"{'all but patch':<14}{len(others):>5}{p50:>10.1f}{p95:>10.1f}")
    print(f"errors: {len(errors)}")
    for error in errors[:5]:
        print("  " + error)
    print(f"RSS: {rss_start:.0f} MB after warm-up, {rss_end:.0f} MB at the end "
          f"({rss_end - rss_start:+.0f} MB)")  # fmt: skip


if __name__ == "__main__":
    main()
