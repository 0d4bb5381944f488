"""A full cache on the CPU, repeated: memory stays flat and a kept cache is never overwritten,
with glibc's defaults and with ``interp.malloc_tuning.keep_freed_memory()`` (which changes the
whole process, so it runs in a child process); with it, a repeated cache lands on reused
memory (page faults, unlike times, do not depend on the machine's load)."""

from __future__ import annotations

import json
import platform
import subprocess
import sys
import textwrap

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig

CHECK = textwrap.dedent(
    """
    import gc, json, resource, sys
    import torch
    from interp import HookedTransformer, HookedTransformerConfig
    from interp.malloc_tuning import keep_freed_memory

    kept_freed = sys.argv[1] == "keep" and keep_freed_memory()
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=128, n_heads=4, d_mlp=512, d_vocab=100, n_ctx=128, seed=0
    )
    model = HookedTransformer(cfg).eval()

    def cache(seed):
        tokens = torch.randint(0, 100, (4, 128), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            return dict(model.run_with_cache(tokens, return_type=None)[1].items())

    def resident():
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * 4096

    kept = cache(0)
    expected = {name: tensor.clone() for name, tensor in kept.items()}
    one_cache = sum(t.untyped_storage().nbytes() for t in expected.values())
    cache(1)
    gc.collect()
    before = resident()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for seed in range(2, 22):
        cache(seed)
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / 20
    print(json.dumps({
        "kept_freed": kept_freed,
        "growth": resident() - before,
        "one_cache": one_cache,
        "faults_a_cache": faults,
        "pages_a_cache": one_cache / 4096,
        "kept_unchanged": all(torch.equal(kept[n], expected[n]) for n in kept),
    }))
    """
)


def run_check(mode: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, mode], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
@pytest.mark.parametrize("mode", ["default", "keep"])
def test_repeated_full_caches_stay_flat_and_leave_a_kept_cache_unchanged(mode):
    result = run_check(mode)
    # Twenty more caches would add twenty caches' memory if any were kept; allow three (glibc's
    # heap and Python's allocator may still hold a cache or so more at one moment than another).
    assert result["growth"] < 3 * result["one_cache"], result
    assert result["kept_unchanged"], result


@pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc's mallopt"
)
def test_kept_freed_memory_serves_a_repeated_cache_without_fresh_pages():
    result = run_check("keep")
    assert result["kept_freed"], result
    # Every page of a cache on fresh memory would fault; reused memory faults for almost none.
    assert result["faults_a_cache"] < 0.1 * result["pages_a_cache"], result


def test_a_kept_cache_is_the_activations_and_later_calls_leave_it_alone():
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=32, n_heads=4, d_mlp=64, d_vocab=50, n_ctx=16, seed=0
    )
    model = HookedTransformer(cfg).eval()
    tokens = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, kept = model.run_with_cache(tokens)
        expected = {name: tensor.clone() for name, tensor in kept.items()}
        pointers = {tensor.untyped_storage().data_ptr() for tensor in kept.values()}
        for seed in (1, 2, 3):
            other = torch.randint(0, 50, (2, 16), generator=torch.Generator().manual_seed(seed))
            _, later = model.run_with_cache(other)
            assert not pointers & {t.untyped_storage().data_ptr() for t in later.values()}
    for name, tensor in kept.items():
        assert torch.equal(tensor, expected[name]), name
