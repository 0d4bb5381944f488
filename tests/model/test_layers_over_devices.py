"""Layers over devices in one process (``n_devices``, ``device_map``): the plan is checked
before any weight is read and a bad one leaves nothing half-placed; a model laid over
devices computes what one device computes. Without a second device here, the forward runs
on maps of "cpu" only; the test that moves the residual between real devices needs CUDA
(``benchmarks/gpu_check.py`` runs the same on a lent GPU)."""

from __future__ import annotations

import pytest
import torch
import transformers

from interp import HookedTransformer, HookedTransformerConfig
from interp.loading import checkpoint
from interp.utils.device_map import get_device_for_block_index

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
pytestmark = pytest.mark.filterwarnings("ignore:.*has no tokenizer files")
TOKENS = torch.randint(0, 100, (2, 9), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """A GPT-2 (learned positions), a Llama (rotary, grouped keys) and a BLOOM (ALiBi)."""
    torch.manual_seed(0)
    made = {
        "gpt2": transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=4, n_embd=32, n_head=4, n_positions=32, vocab_size=100)
        ),
        "llama": transformers.LlamaForCausalLM(
            transformers.LlamaConfig(
                hidden_size=32,
                intermediate_size=64,
                num_hidden_layers=4,
                num_attention_heads=4,
                num_key_value_heads=2,
                vocab_size=100,
                max_position_embeddings=32,
            )
        ),
        "bloom": transformers.BloomForCausalLM(
            transformers.BloomConfig(n_layer=4, hidden_size=32, n_head=4, vocab_size=100)
        ),
    }
    folders = {}
    for name, hf_model in made.items():
        folders[name] = tmp_path_factory.mktemp(name)
        hf_model.save_pretrained(folders[name])
    return folders


def count_reads(monkeypatch) -> list[str]:
    """The names of the checkpoint tensors read from here on."""
    read: list[str] = []
    original = checkpoint.TensorSource.take

    def take(self, name):
        read.append(name)
        return original(self, name)

    monkeypatch.setattr(checkpoint.TensorSource, "take", take)
    return read


def test_a_device_map_loads_and_computes_as_one_device(folders):
    one = HookedTransformer.from_pretrained(folders["gpt2"], device="cpu")
    device_map = {"embed": "cpu", "blocks.0": "cpu", "blocks": "cpu", "unembed": "cpu"}
    laid = HookedTransformer.from_pretrained(folders["gpt2"], device_map=device_map)
    assert set(laid.device_map) == {
        "embed",
        "pos_embed",
        "blocks.0",
        "blocks.1",
        "blocks.2",
        "blocks.3",
        "unembed",
    }  # ln_final folded: no weights
    assert laid.cfg.device == "cpu" and laid.cfg.n_devices == 1
    logits, cache = laid.run_with_cache(TOKENS, device="cpu")
    expected, expected_cache = one.run_with_cache(TOKENS)
    assert torch.equal(logits, expected)
    assert all(torch.equal(cache[name], expected_cache[name]) for name in expected_cache)


def test_device_map_auto_with_max_memory(folders):
    laid = HookedTransformer.from_pretrained_no_processing(
        folders["llama"], device_map="auto", max_memory={"cpu": "1GiB"}, tokenizer=None
    )
    one = HookedTransformer.from_pretrained_no_processing(folders["llama"], tokenizer=None)
    assert set(laid.device_map.values()) == {"cpu"}
    assert torch.equal(laid(TOKENS), one(TOKENS))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (dict(device_map={"embed": "cpu", "blocks": "cpu", "lm_head": "cpu"}), "'lm_head'"),
        (dict(device_map={"embed": "cpu", "blocks.0": "cpu", "unembed": "cpu"}), "leaves"),
        (dict(device_map="auto"), "needs max_memory"),
        (dict(device_map="auto", max_memory={"cpu": 1000}), "do not fit max_memory"),
        (dict(device_map={"blocks": "cpu"}, device="cpu"), "pass one"),
        (dict(device_map={"blocks": "cpu"}, n_devices=2), "not both"),
        (dict(max_memory={"cpu": "1GiB"}), "max_memory goes with device_map='auto'"),
        (dict(n_devices=0), "n_devices must be a positive integer"),
    ],
)
def test_bad_placements_are_named_before_any_weight_is_read(folders, monkeypatch, kwargs, message):
    read = count_reads(monkeypatch)
    with pytest.raises(ValueError, match=message):
        HookedTransformer.from_pretrained(folders["gpt2"], **kwargs)
    assert read == []


@no_cuda
def test_devices_this_machine_lacks_are_named_before_any_weight_is_read(folders, monkeypatch):
    read = count_reads(monkeypatch)
    with pytest.raises(ValueError, match="n_devices=2 needs cuda:0"):
        HookedTransformer.from_pretrained(folders["gpt2"], n_devices=2)
    device_map = {"embed": "cpu", "blocks": "cuda:0", "unembed": "cpu"}
    with pytest.raises(ValueError, match="'cuda:0' needs CUDA"):
        HookedTransformer.from_pretrained(folders["gpt2"], device_map=device_map)
    assert read == []


def test_a_bad_map_leaves_a_built_model_where_it_was(folders):
    model = HookedTransformer.from_pretrained(folders["gpt2"], device="cpu")
    before = model.device_map
    with pytest.raises(ValueError, match="'blocks.7'"):
        model.place_modules({"embed": "cpu", "blocks": "cpu", "blocks.7": "meta"})
    with pytest.raises(ValueError, match="meta device holds no weights"):
        model.place_modules({"embed": "cpu", "blocks": "meta", "unembed": "cpu"})
    assert model.device_map == before
    assert all(t.device.type == "cpu" for t in [*model.parameters(), *model.buffers()])


def test_a_config_with_n_devices_on_the_cpu_is_transformer_lens_s():
    """TransformerLens puts every block on a CPU ``cfg.device`` whatever ``n_devices``."""
    cfg = HookedTransformerConfig(
        n_layers=4, d_model=16, n_ctx=8, d_head=4, d_vocab=20, n_devices=2, device="cpu"
    )
    model = HookedTransformer(cfg)
    assert set(model.device_map.values()) == {"cpu"}
    assert model.device_map["blocks.3"] == str(get_device_for_block_index(3, cfg))
    with pytest.raises(ValueError, match="n_devices must be positive"):
        HookedTransformerConfig(n_layers=1, d_model=8, n_ctx=4, d_head=4, n_devices=0)


@no_cuda
def test_a_config_with_more_devices_than_the_machine_has_is_named():
    cfg = HookedTransformerConfig(n_layers=2, d_model=16, n_ctx=8, d_head=4, d_vocab=20)
    cfg.n_devices = 2  # device None: CUDA, as TransformerLens
    with pytest.raises(ValueError, match="needs CUDA"):
        HookedTransformer(cfg)


@cuda
@pytest.mark.parametrize("family", ["gpt2", "llama", "bloom"])
def test_half_the_blocks_on_the_gpu_half_on_the_cpu(folders, family):
    """Embed and blocks 0-1 on cuda:0, blocks 2-3, ln_final and unembed on the CPU: logits,
    every cached activation (gathered to the CPU), the loss, KV-cache generation equal to the
    all-CPU model within fp32 rounding; each activation made where its block is."""
    from tests.support.tolerances import logits_bound

    one = HookedTransformer.from_pretrained_no_processing(folders[family], tokenizer=None)
    device_map = {"embed": "cuda:0", "blocks.0": "cuda:0", "blocks.1": "cuda:0"}
    device_map |= {"blocks.2": "cpu", "blocks.3": "cpu", "unembed": "cpu"}
    laid = HookedTransformer.from_pretrained_no_processing(
        folders[family], device_map=device_map, tokenizer=None
    )
    assert laid.cfg.device == "cuda:0" and laid.cfg.n_devices == 2
    mask = torch.ones_like(TOKENS)
    mask[1, :3] = 0  # left padding: masks and positions cross the boundary too
    logits, cache = laid.run_with_cache(TOKENS, attention_mask=mask)
    assert cache["blocks.0.hook_resid_post"].device.type == "cuda"
    assert cache["blocks.3.hook_resid_post"].device.type == "cpu"
    _, gathered = laid.run_with_cache(TOKENS, attention_mask=mask, device="cpu")
    expected, expected_cache = one.run_with_cache(TOKENS, attention_mask=mask)
    bound = logits_bound(one.cfg, expected)
    assert (logits.cpu() - expected).abs().max() <= bound
    for name, value in expected_cache.items():
        assert gathered[name].device.type == "cpu"
        torch.testing.assert_close(gathered[name], value, atol=bound, rtol=1e-4)
    loss = laid(TOKENS, return_type="loss")
    torch.testing.assert_close(loss.cpu(), one(TOKENS, return_type="loss"), atol=1e-5, rtol=0)
    prompt = TOKENS[:1, :4]
    generated = laid.generate(prompt, max_new_tokens=5, do_sample=False, verbose=False)
    assert torch.equal(
        generated.cpu(), one.generate(prompt, max_new_tokens=5, do_sample=False, verbose=False)
    )


@cuda
def test_other_loaders_and_stacked_weights_follow_the_map(folders, tmp_path):
    """An interp folder (loaded, then placed) and ``hf_model`` (placed, moved, placed again)
    end where the map says; ``model.W_Q`` stacks the blocks' weights on the first device."""
    import transformers

    device_map = {"embed": "cuda:0", "blocks.0": "cuda:0", "blocks": "cpu", "unembed": "cpu"}
    one = HookedTransformer.from_pretrained_no_processing(folders["llama"], tokenizer=None)
    saved = one.save(tmp_path / "native")
    hf_model = transformers.LlamaForCausalLM.from_pretrained(folders["llama"])
    for laid in (
        HookedTransformer.from_pretrained_no_processing(saved, device_map=device_map),
        HookedTransformer.from_pretrained_no_processing(
            folders["llama"], hf_model=hf_model, device_map=device_map, tokenizer=None
        ),
    ):
        assert laid.device_map["blocks.0"] == "cuda:0" and laid.device_map["blocks.1"] == "cpu"
        assert laid.W_Q.device == torch.device("cuda:0")
        torch.testing.assert_close(laid(TOKENS).cpu(), one(TOKENS), atol=1e-4, rtol=1e-4)
