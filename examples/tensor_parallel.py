"""Tensor parallel with hooks, run on every rank of torchrun:

    torchrun --nproc_per_node 2 examples/tensor_parallel.py                # a tiny random Llama
    torchrun --nproc_per_node 2 examples/tensor_parallel.py path/or/hub-id # your checkpoint

Each rank holds half of every block's heads and neurons (read alone from the checkpoint's
files); every hook sees, edits and differentiates the whole activation, as in one process.
Rank 0 prints. On CPUs the ranks talk over gloo, on GPUs over NCCL (one GPU per rank).
"""

from __future__ import annotations

import sys
import tempfile

import torch
import torch.distributed as dist

from interp import HookedTransformer


def tiny_llama() -> str:
    """A random 2-layer Llama with grouped-query attention, saved to a temporary folder (the
    same weights on every rank: the same seed)."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    folder = tempfile.mkdtemp()
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def main() -> None:
    folder = sys.argv[1] if len(sys.argv) > 1 else tiny_llama()
    model = HookedTransformer.from_pretrained(folder, tp_size=2)
    rank = dist.get_rank()
    say = print if rank == 0 else (lambda *args: None)
    own = sum(p.numel() for p in model.blocks[0].parameters())
    say(f"tp_size={model.cfg.tp_size}: rank 0 holds {own} of block 0's parameters")

    tokens = torch.tensor([[1, 5, 9, 20, 3, 7, 11, 2]])  # the same tokens on every rank
    logits, cache = model.run_with_cache(tokens)
    say("logits", tuple(logits.shape), "pattern", tuple(cache["pattern", 0].shape))

    def ablate_head(z, hook):  # z: [batch, pos, n_heads, d_head], every head, on every rank
        z[:, :, 3] = 0
        return z

    ablated = model.run_with_hooks(tokens, fwd_hooks=[("blocks.0.attn.hook_z", ablate_head)])
    say(f"ablating head 0.3 moves the logits by {(ablated - logits).abs().max():.3g}")

    grads = {}
    with model.hooks(bwd_hooks=[("hook_embed", lambda grad, hook: grads.update(embed=grad))]):
        model(tokens, return_type="loss").backward()
    say("gradient at hook_embed", tuple(grads["embed"].shape))

    generated = model.generate(tokens[:, :4], max_new_tokens=4, do_sample=False, verbose=False)
    say("greedy continuation", generated[0, 4:].tolist())
    dist.barrier()  # every rank done before the group is torn down
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
