"""Threads sharing one model: each thread's temporary hooks are its own; add_hook hooks are
everyone's."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import torch

from interp import HookedTransformer, HookedTransformerConfig
from tests.support.tolerances import model_tolerance

CACHED = ("blocks.0.attn.hook_pattern", "blocks.1.attn.hook_pattern", "blocks.0.hook_attn_out")


def make_model() -> HookedTransformer:
    cfg = dict(n_layers=2, d_model=32, n_heads=4, d_head=8, d_mlp=64, d_vocab=50, n_ctx=16, seed=0)
    return HookedTransformer(HookedTransformerConfig(**cfg)).eval()


def wait_at(barrier: threading.Barrier):
    def wait(x, hook) -> None:
        barrier.wait()

    return wait


def test_two_threads_run_different_hooks_on_one_model_at_once(monkeypatch):
    model = make_model()
    tokens = torch.randint(0, 50, (2, 6))
    calls: list[tuple[str, int]] = []  # (hook, thread) for every call of the shared hooks

    def zero(x, hook):
        calls.append(("zero", threading.get_ident()))
        return x * 0

    # References, one thread at a time: A ablates block 0's attention; B caches patterns.
    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.hook_attn_out", zero)])
    cached_logits, cached = model.run_with_cache(tokens, names_filter=list(CACHED))
    calls.clear()

    # Both threads wait at hook_embed until both have attached all their hooks, and at the
    # final layer norm until both have run every block: the two passes overlap completely.
    start, end = threading.Barrier(2, timeout=60), threading.Barrier(2, timeout=60)
    overlap = [("hook_embed", wait_at(start)), ("ln_final.hook_scale", wait_at(end))]
    model.add_hook("hook_embed", lambda x, hook: calls.append(("global", threading.get_ident())))
    fused = []  # the threads whose block-0 attention took the fused kernel
    attn = model.blocks[0].attn
    fast_attention = attn.fast_attention

    def spy(*args, **kwargs):
        fused.append(threading.get_ident())
        return fast_attention(*args, **kwargs)

    monkeypatch.setattr(attn, "fast_attention", spy)

    def thread_a():
        hooks = [*overlap, ("blocks.0.hook_attn_out", zero)]
        return threading.get_ident(), model.run_with_hooks(tokens, fwd_hooks=hooks)

    def thread_b():
        with model.hooks(fwd_hooks=overlap):
            logits, cache = model.run_with_cache(tokens, names_filter=list(CACHED))
        return threading.get_ident(), logits, cache

    with ThreadPoolExecutor(2) as pool:
        a, b = pool.submit(thread_a), pool.submit(thread_b)
        a_thread, a_logits = a.result(timeout=120)
        b_thread, b_logits, b_cache = b.result(timeout=120)

    assert a_thread != b_thread
    # The same passes, run while another takes the CPU's threads: at most a forward's error.
    torch.testing.assert_close(a_logits, ablated, **model_tolerance(model.cfg, ablated))
    torch.testing.assert_close(b_logits, cached_logits, **model_tolerance(model.cfg, b_logits))
    assert set(b_cache.keys()) == set(CACHED)
    for name in CACHED:
        within = model_tolerance(model.cfg, cached[name])
        torch.testing.assert_close(b_cache[name], cached[name], **within)
    assert b_cache["blocks.0.hook_attn_out"].abs().sum() > 0  # A's ablation did not reach B
    # A's hook ran in A's pass only; the global hook in both; B's caching hooks (on the
    # patterns) kept only B off the fused attention kernel.
    assert sorted(calls) == sorted([("zero", a_thread), ("global", a_thread), ("global", b_thread)])
    assert fused == [a_thread]
    model.reset_hooks()
    assert not any(hp.has_hooks for hp in model.hook_dict.values())


def test_another_threads_reset_leaves_a_running_context_its_hooks():
    model = make_model()
    tokens = torch.randint(0, 50, (1, 4))
    calls = []
    with model.hooks(fwd_hooks=[("hook_embed", lambda x, hook: calls.append(hook.name))]):
        seen_elsewhere = []

        def reset_from_another_thread():
            seen_elsewhere.append(model.hook_dict["hook_embed"].has_hooks)
            model.reset_hooks(including_permanent=True)

        worker = threading.Thread(target=reset_from_another_thread)
        worker.start()
        worker.join()
        model(tokens)
    model(tokens)
    assert seen_elsewhere == [False] and calls == ["hook_embed"]
    assert not any(hp.has_hooks for hp in model.hook_dict.values())
