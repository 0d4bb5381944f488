"""Tensor parallel over 2 gloo processes against the same checkpoint in one process, on
GPT-2-, Llama- (grouped-query), Gemma 2- and Mixtral-shaped random checkpoints: logits, every
hook in the cache, editing hooks, gradients, patching sweeps, a spliced SAE and generation,
within fp32 reduction-order rounding; per-rank block weights; bad inputs raised on every rank.

One torchrun launch runs every check (``tp_checks.py``); each check is then a test here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import transformers

from interp import HookedTransformer
from interp.config import HookedTransformerConfig
from interp.distributed import TensorParallelError, check_tp_size, valid_sizes
from interp.distributed.plan import ShardPlan
from interp.distributed.sharded_loading import ShardedSource
from interp.loading.checkpoint import read_config_json
from interp.loading.families import family_for
from interp.loading.hf import hf_folder_source
from tests.distributed.launch import torchrun

SMALL = dict(vocab_size=128, max_position_embeddings=64)
LLAMA_LIKE = SMALL | dict(
    hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4
)


def checkpoints() -> dict[str, tuple[transformers.PreTrainedModel, str]]:
    """Each model, and how it is loaded ("processed": from_pretrained; "raw": without
    processing)."""
    return {
        "gpt2": (
            transformers.GPT2LMHeadModel(
                transformers.GPT2Config(
                    vocab_size=128, n_embd=64, n_layer=2, n_head=4, n_positions=64
                )
            ),
            "processed",
        ),
        "llama-gqa": (
            transformers.LlamaForCausalLM(
                transformers.LlamaConfig(**LLAMA_LIKE, num_key_value_heads=2)
            ),
            "processed",
        ),
        "gemma2-one-kv-head": (
            transformers.Gemma2ForCausalLM(
                transformers.Gemma2Config(
                    **LLAMA_LIKE,
                    num_key_value_heads=1,
                    head_dim=16,
                    query_pre_attn_scalar=24,
                    sliding_window=4,
                    attn_logit_softcapping=3.0,
                    final_logit_softcapping=4.0,
                )
            ),
            "raw",
        ),
        "mixtral": (
            transformers.MixtralForCausalLM(
                transformers.MixtralConfig(
                    **LLAMA_LIKE, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2
                )
            ),
            "raw",
        ),
    }


def light_checkpoints() -> dict[str, transformers.PreTrainedModel]:
    """The other supported families, checked on their logits and every cached hook."""
    experts = dict(num_key_value_heads=2, num_experts_per_tok=2, num_experts=4)
    return {
        "mistral-window": transformers.MistralForCausalLM(
            transformers.MistralConfig(**LLAMA_LIKE, num_key_value_heads=2, sliding_window=4)
        ),
        "qwen2-bias": transformers.Qwen2ForCausalLM(
            transformers.Qwen2Config(**LLAMA_LIKE, num_key_value_heads=2)
        ),
        "qwen3-qk-norm": transformers.Qwen3ForCausalLM(
            transformers.Qwen3Config(**LLAMA_LIKE, num_key_value_heads=2, head_dim=16)
        ),
        "gemma": transformers.GemmaForCausalLM(
            transformers.GemmaConfig(**LLAMA_LIKE, num_key_value_heads=1, head_dim=16)
        ),
        "gemma3": transformers.Gemma3ForCausalLM(
            transformers.Gemma3TextConfig(
                **LLAMA_LIKE,
                num_key_value_heads=2,
                head_dim=16,
                layer_types=["sliding_attention", "full_attention"],
                sliding_window=4,
            )
        ),
        "qwen2-moe-shared-expert": transformers.Qwen2MoeForCausalLM(
            transformers.Qwen2MoeConfig(
                **LLAMA_LIKE,
                **experts,
                moe_intermediate_size=40,
                shared_expert_intermediate_size=72,
            )
        ),
        "qwen3-moe": transformers.Qwen3MoeForCausalLM(
            transformers.Qwen3MoeConfig(**LLAMA_LIKE, **experts, moe_intermediate_size=40)
        ),
        "neox-parallel-partial-rotary": transformers.GPTNeoXForCausalLM(
            transformers.GPTNeoXConfig(**LLAMA_LIKE, rotary_pct=0.5, use_parallel_residual=True)
        ),
        "gptj": transformers.GPTJForCausalLM(
            transformers.GPTJConfig(
                vocab_size=128, n_positions=64, n_embd=64, n_layer=2, n_head=4, rotary_dim=8
            )
        ),
        "gpt-neo-local": transformers.GPTNeoForCausalLM(
            transformers.GPTNeoConfig(
                vocab_size=128,
                max_position_embeddings=64,
                hidden_size=64,
                num_layers=2,
                num_heads=4,
                attention_types=[[["global", "local"], 1]],
                window_size=4,
            )
        ),  # fmt: skip
        "opt": transformers.OPTForCausalLM(
            transformers.OPTConfig(
                vocab_size=128,
                max_position_embeddings=64,
                hidden_size=64,
                num_hidden_layers=2,
                num_attention_heads=4,
                ffn_dim=96,
                word_embed_proj_dim=64,
            )
        ),  # fmt: skip
        "phi-partial-rotary": transformers.PhiForCausalLM(
            transformers.PhiConfig(**LLAMA_LIKE, partial_rotary_factor=0.5)
        ),
    }


def save(model: transformers.PreTrainedModel, folder: Path) -> Path:
    torch.manual_seed(0)
    with torch.no_grad():
        for weight in model.parameters():
            weight.normal_(std=0.2)
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[int, list[dict]]:
    """Every rank's check results from one torchrun launch over every model."""
    root = tmp_path_factory.mktemp("tp")
    specs = [
        f"{name}={save(model, root / name)}:{processing}"
        for name, (model, processing) in checkpoints().items()
    ]
    specs += [
        f"{name}={save(model, root / name)}:light" for name, model in light_checkpoints().items()
    ]
    three_heads = transformers.LlamaConfig(
        **SMALL, hidden_size=48, intermediate_size=96, num_hidden_layers=1, num_attention_heads=3
    )
    specs.append(f"heads3={save(transformers.LlamaForCausalLM(three_heads), root / 'heads3')}")
    out = root / "out"
    out.mkdir()
    done = torchrun(Path(__file__).parent / "tp_checks.py", str(out), *specs)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-5000:]
    return {rank: json.loads((out / f"rank{rank}.json").read_text()) for rank in (0, 1)}


MODELS = ["gpt2", "llama-gqa", "gemma2-one-kv-head", "mixtral"]


LIGHT = [
    "mistral-window",
    "qwen2-bias",
    "qwen3-qk-norm",
    "gemma",
    "gemma3",
    "qwen2-moe-shared-expert",
    "qwen3-moe",
    "neox-parallel-partial-rotary",
    "phi-partial-rotary",
    "gptj",
    "gpt-neo-local",
    "opt",
]


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("model", [*MODELS, *LIGHT, "errors"])
def test_every_check_passes_on_every_rank(results, model, rank):
    mine = [result for result in results[rank] if result["model"] == model]
    assert len(mine) > 5, mine
    failed = [f"{r['check']}: {r['detail']}" for r in mine if not r["ok"]]
    assert not failed, "\n".join(failed)


def test_every_hook_of_the_cache_is_compared(results):
    for model in MODELS:
        names = {r["check"] for r in results[0] if r["model"] == model}
        for hook in ("blocks.1.attn.hook_q", "blocks.1.attn.hook_pattern", "blocks.0.attn.hook_k"):
            assert f"cache {hook}" in names, model
        assert "cache blocks.0.attn.hook_result" in names


def test_tp_size_without_a_process_group_is_a_clear_error(tmp_path, monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    folder = save(checkpoints()["llama-gqa"][0], tmp_path / "llama")
    with pytest.raises(TensorParallelError, match="torchrun --nproc_per_node 2"):
        HookedTransformer.from_pretrained(folder, tp_size=2)


def test_sizes_that_do_not_split_the_heads_name_the_counts_and_valid_sizes():
    gqa = HookedTransformerConfig(
        n_layers=1, d_model=96, n_ctx=8, n_heads=6, d_mlp=96, n_key_value_heads=3
    )
    assert valid_sizes(gqa) == [1, 3, 6]  # 2 splits neither 3 key/value heads nor 1 of them
    for size in (2, 4):
        with pytest.raises(ValueError, match=r"n_heads=6, n_key_value_heads=3.*\[1, 3, 6\]"):
            check_tp_size(gqa, size, "Llama")
    with pytest.raises(ValueError, match="supports the"):
        check_tp_size(gqa, 2, "BLOOM")  # ALiBi slopes depend on the global head index


def test_key_value_heads_fewer_than_ranks_are_shared():
    cfg = HookedTransformerConfig(
        n_layers=1, d_model=64, n_ctx=8, n_heads=8, d_mlp=64, n_key_value_heads=2
    )
    layouts = [ShardPlan(cfg, rank, 4).kv_heads(2) for rank in range(4)]
    assert layouts[0].starts == (0, 0, 1, 1)
    assert layouts[0].owners() == [0, 2]
    assert [layout.is_owner(rank) for rank, layout in enumerate(layouts)] == [1, 0, 1, 0]
    # A query projection's rows of rank 3: its heads 6 and 7 of d_head 8.
    plan = ShardPlan(cfg, 3, 4)
    assert plan.checkpoint_ranges("q_proj", (64, 64), (16, 64)) == (0, [(48, 64)])
    assert plan.checkpoint_ranges("k_proj", (16, 64), (8, 64)) == (0, [(8, 16)])
    assert plan.checkpoint_ranges("h.0.attn.c_attn.weight", (64, 192), (64, 48)) == (
        1,
        [(48, 64), (112, 128), (176, 192)],
    )


@pytest.mark.parametrize("rank", [0, 1])
def test_a_rank_reads_only_its_slices_of_the_block_tensors(tmp_path, rank):
    """In one process: rank ``rank``'s shard of a GQA Llama checkpoint equals the slices of
    the whole model's parameters, and every split tensor was read as a slice, never whole."""
    folder = save(checkpoints()["llama-gqa"][0], tmp_path / "llama")
    whole = HookedTransformer.from_pretrained_no_processing(folder)
    hf_config = read_config_json(folder / "config.json")
    family = family_for(hf_config)
    plan = ShardPlan(whole.cfg, rank, 2)
    source = hf_folder_source(folder)
    read_whole = []
    take = source.take
    source.take = lambda name: read_whole.append(name) or take(name)
    sharded = ShardedSource(source, plan, family, hf_config)
    shard = dict(family.checked_tensors(sharded, plan.local_config(), hf_config, "test"))
    assert not [name for name in read_whole if name in sharded.slices]
    assert any("q_proj" in name for name in sharded.slices)
    heads, kv, neurons = (
        slice(2 * rank, 2 * rank + 2),
        slice(rank, rank + 1),
        slice(48 * rank, 48 * rank + 48),
    )
    attn, mlp = whole.blocks[1].attn, whole.blocks[1].mlp
    expected = {
        "blocks.1.attn.W_Q": attn.W_Q[heads],
        "blocks.1.attn.W_O": attn.W_O[heads],
        "blocks.1.attn._W_K": attn._W_K[kv],
        "blocks.1.mlp.W_in": mlp.W_in[:, neurons],
        "blocks.1.mlp.W_out": mlp.W_out[neurons],
        "embed.W_E": whole.embed.W_E,
    }
    for name, tensor in expected.items():
        assert torch.equal(shard[name], tensor), name
