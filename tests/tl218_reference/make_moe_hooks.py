"""TransformerLens 2.18's MoE hooks on a tiny random Mixtral: the checkpoint (transformers
4.57's ``MixtralForCausalLM``, saved as ``api/moe_mixtral/``) loaded into TL's
``HookedTransformer`` with ``hf_model=`` (its config read from the hub cache under the official
name, offline), and its logits and every ``mlp`` hook of ``run_with_cache`` on fixed tokens
written to ``api/moe_mixtral_hooks.safetensors`` (tokens under ``tokens``).
Run from the repository root:
/work/tl218-venv/bin/python tests/tl218_reference/make_moe_hooks.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from make_api import HERE, cache_repo, save_file, torch, transformers  # noqa: E402
from transformer_lens import HookedTransformer  # noqa: E402

OFFICIAL = "mistralai/Mixtral-8x7B-v0.1"


def word_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer of the vocabulary (TL needs one; the tokens are given as ids)."""
    from tokenizers import Tokenizer, models

    vocab = {f"w{i}": i for i in range(100)}
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="w0")), bos_token="w1"
    )


def main() -> None:
    torch.manual_seed(0)
    config = transformers.MixtralConfig(
        vocab_size=100, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
        num_experts_per_tok=2, max_position_embeddings=64,
    )  # fmt: skip
    hf_model = transformers.MixtralForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():  # weights that make every layer and every router matter
        for param in hf_model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.3)
    folder = HERE / "moe_mixtral"
    hf_model.save_pretrained(folder)
    cache_repo(OFFICIAL, {"config.json": folder / "config.json"})
    word_tokenizer().save_pretrained(folder)  # TL reads its name_or_path: load it back
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    model = HookedTransformer.from_pretrained_no_processing(
        OFFICIAL, hf_model=hf_model, tokenizer=tokenizer, dtype=torch.float32, device="cpu"
    )
    tokens = torch.randint(0, 100, (2, 10), generator=generator)
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    tensors = {"tokens": tokens, "logits": logits}
    tensors |= {name: value for name, value in cache.items() if ".mlp." in name}
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, HERE / "moe_mixtral_hooks.safetensors"
    )


if __name__ == "__main__":
    main()
