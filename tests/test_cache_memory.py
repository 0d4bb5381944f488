"""run_with_cache's CPU storage pool (interp.cache_memory): repeated full caches reuse the
memory of dropped ones (no growth), and never the memory of a cache someone still holds."""

from __future__ import annotations

import gc
import sys
import threading

import pytest
import torch

from interp import HookedTransformer, HookedTransformerConfig, cache_memory
from interp.cache_memory import PoolLease, StoragePool, pool_for


@pytest.fixture(autouse=True)
def reuse_on():
    """The pool on for these tests (it is by default; an earlier test may have turned it off)."""
    previous = cache_memory.set_reuse(True)
    yield
    cache_memory.set_reuse(previous)


@pytest.fixture(scope="module")
def model() -> HookedTransformer:
    cfg = HookedTransformerConfig(
        n_layers=2, d_model=128, n_heads=4, d_mlp=512, d_vocab=100, n_ctx=128, seed=0
    )
    return HookedTransformer(cfg).eval()


def tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, 100, (4, 128), generator=torch.Generator().manual_seed(seed))


def full_cache(model: HookedTransformer, seed: int) -> dict[str, torch.Tensor]:
    with torch.no_grad():
        return dict(model.run_with_cache(tokens(seed), return_type=None)[1].items())


def storage_bytes(cache: dict[str, torch.Tensor]) -> int:
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage() for t in cache.values()}
    return sum(storage.nbytes() for storage in storages.values())


def resident_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_repeated_full_caches_reuse_one_cache_of_memory(model):
    one_cache = storage_bytes(full_cache(model, 0))
    pool = pool_for(model)
    for seed in range(1, 4):
        cache = full_cache(model, seed)
        assert pool.nbytes() == one_cache  # the dropped cache's storages, reused
        del cache


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/self/statm")
def test_repeated_full_caches_do_not_grow_resident_memory(model):
    one_cache = storage_bytes(full_cache(model, 0))
    full_cache(model, 1)
    gc.collect()
    before = resident_bytes()
    for seed in range(2, 22):
        full_cache(model, seed)
    # Twenty more caches would add twenty caches' memory if any were kept; allow one (what
    # glibc's heap may still grow or shrink by), far below two.
    assert resident_bytes() - before < one_cache


def test_a_kept_cache_survives_later_calls_unchanged(model):
    kept = full_cache(model, 0)
    expected = {name: tensor.clone() for name, tensor in kept.items()}
    later = [full_cache(model, seed) for seed in (1, 2)]  # these two are kept too
    del later[0]
    for seed in (3, 4, 5):
        full_cache(model, seed)
    for name, tensor in kept.items():
        assert torch.equal(tensor, expected[name]), name
    kept_ptrs = {t.untyped_storage().data_ptr() for t in kept.values()}
    assert not kept_ptrs & {t.untyped_storage().data_ptr() for t in later[0].values()}


RESID = "blocks.1.hook_resid_post"  # [4, 128, 128]
HOLDS = {  # what is kept of the cache: (take it from the tensor, read it back as a tensor)
    "view": (lambda t: t[0, :3], lambda held: held),
    "numpy": (lambda t: t.numpy(), torch.from_numpy),
    "storage": (
        lambda t: t.untyped_storage(),
        lambda held: torch.empty(0).set_(held, 0, (4, 128, 128)),
    ),
}


@pytest.mark.parametrize("hold", HOLDS)
def test_what_the_user_holds_of_a_cache_is_never_reused(model, hold):
    take, read = HOLDS[hold]
    tensor = full_cache(model, 0)[RESID]
    held = take(tensor)
    expected = read(take(tensor.clone())).clone()
    ptr = tensor.untyped_storage().data_ptr()
    del tensor  # the cache is gone; only `held` refers to its memory
    for seed in (1, 2):
        assert full_cache(model, seed)[RESID].untyped_storage().data_ptr() != ptr
    assert torch.equal(read(held), expected)


def test_dropped_cache_memory_is_reused(model):
    ptr = full_cache(model, 0)[RESID].untyped_storage().data_ptr()
    assert full_cache(model, 1)[RESID].untyped_storage().data_ptr() == ptr


def test_pooled_cache_equals_the_activations_themselves(model):
    previous = cache_memory.set_reuse(False)
    try:
        expected = full_cache(model, 7)
    finally:
        cache_memory.set_reuse(previous)
    pooled = full_cache(model, 7)
    assert pooled.keys() == expected.keys()
    for name, tensor in pooled.items():
        assert torch.equal(tensor, expected[name]) and tensor.shape == expected[name].shape, name
    # Activations that are one tensor under two names stay one storage; none grows.
    assert storage_bytes(pooled) == storage_bytes(expected)
    same = pooled["blocks.0.hook_resid_post"].untyped_storage().data_ptr()
    assert same == pooled["blocks.1.hook_resid_pre"].untyped_storage().data_ptr()


def test_cache_options_and_inference_mode_with_the_pool(model):
    with torch.inference_mode():
        _, first = model.run_with_cache(tokens(0), dtype=torch.float16, pos_slice=-1)
    assert first["blocks.0.hook_resid_post"].dtype == torch.float16
    assert not first["blocks.0.hook_resid_post"].is_inference()  # a later call may reuse it
    expected = first["blocks.0.hook_resid_post"].clone()
    del first
    _, second = model.run_with_cache(tokens(0), dtype=torch.float16, pos_slice=-1)
    assert torch.equal(second["blocks.0.hook_resid_post"], expected)
    assert second["blocks.0.hook_resid_post"].shape == (4, 1, 128)


def test_the_pool_releases_storage_a_call_did_not_reuse(model):
    full_cache(model, 0)
    with torch.no_grad():
        _, small = model.run_with_cache(tokens(1), names_filter="blocks.0.hook_resid_post")
    assert pool_for(model).nbytes() == storage_bytes(dict(small.items()))


def test_a_modified_activation_is_copied_again():
    lease = PoolLease(StoragePool())
    activation = torch.ones(3)
    first = lease.copy(activation, torch.float32)
    lease.remember(activation, 1, first)
    assert lease.copy_of(activation, 1) is not None
    activation.add_(1)  # in place: a later hook sees other values
    assert lease.copy_of(activation, 1) is None
    assert torch.equal(first, torch.ones(3))


def test_threads_get_their_own_storage(model):
    results: dict[int, dict[str, torch.Tensor]] = {}

    def run(seed: int) -> None:
        results[seed] = full_cache(model, seed)

    threads = [threading.Thread(target=run, args=(seed,)) for seed in (10, 11)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ptrs = [{t.untyped_storage().data_ptr() for t in results[s].values()} for s in (10, 11)]
    assert not ptrs[0] & ptrs[1]
    for seed in (10, 11):
        alone = full_cache(model, seed)
        assert all(torch.equal(alone[name], results[seed][name]) for name in alone)
