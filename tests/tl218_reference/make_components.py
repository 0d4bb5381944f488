"""TransformerLens 2.18 reference for shortformer, SoLU and bidirectional models, component
calls in TransformerLens's argument order, key/value caches with custom attention masks,
the opt-in hook errors, weight processing of SoLU models and the activation functions.

Run with the TransformerLens 2.18 environment, from the repository root:

    /work/tl218-venv/bin/python tests/tl218_reference/make_components.py

Writes, next to this script, ``components_<group>.safetensors`` (for each model built there
``<model>.param.*`` its random weights, then each case's inputs and outputs under
``<case>.*``, full caches under ``<case>.cache.<hook name>``) and ``components.json`` (the
configs, the opt-in hook error messages, and each case's model, file and keys).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig, utils
from transformer_lens.past_key_value_caching import HookedTransformerKeyValueCache
from transformer_lens.utilities import activation_functions

HERE = Path(__file__).resolve().parent
BATCH, POS, D_VOCAB = 2, 7, 23
BASE = dict(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=D_VOCAB, n_ctx=12, seed=0)
CONFIGS = {
    # TransformerLens's attn-only-Nl, gelu-Nl and solu-Nl toy models are shortformer models.
    "attn_only_shortformer": dict(
        BASE, attn_only=True, positional_embedding_type="shortformer", normalization_type="LN"
    ),
    "solu_shortformer": dict(
        BASE, d_mlp=32, act_fn="solu_ln", positional_embedding_type="shortformer"
    ),
    "gelu_shortformer": dict(
        BASE, d_mlp=32, act_fn="gelu_new", positional_embedding_type="shortformer"
    ),
    "solu_standard": dict(BASE, d_mlp=32, act_fn="solu_ln"),
    "solu_lnpre": dict(BASE, d_mlp=32, act_fn="solu_ln", normalization_type="LNPre"),
    "solu_plain": dict(BASE, d_mlp=32, act_fn="solu"),
    "xielu": dict(BASE, d_mlp=32, act_fn="xielu"),
    # A balanced-brackets-style classifier: bidirectional, two output classes.
    "bidirectional": dict(
        BASE, d_mlp=32, act_fn="relu", attention_dir="bidirectional", d_vocab_out=2
    ),
    "causal": dict(BASE, d_mlp=32, act_fn="gelu_new"),
    "rotary": dict(BASE, d_mlp=32, act_fn="silu", positional_embedding_type="rotary"),
}
# Padding masks: row 0 is padded on the right (bidirectional) or left (causal), row 1 not.
RIGHT_PADDED = torch.tensor([[1, 1, 1, 1, 0, 0, 0], [1] * POS])
LEFT_PADDED = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1] * POS])

tensors: dict[str, torch.Tensor] = {}  # of the file being written
cases: dict[str, dict] = {}


def build(name: str) -> HookedTransformer:
    """A random model whose every parameter (norm weights and biases too) is off its initial
    value; the weights are saved under ``<name>.param.``."""
    model = HookedTransformer(HookedTransformerConfig(**CONFIGS[name]))
    generator = torch.Generator().manual_seed(sum(map(ord, name)))
    with torch.no_grad():
        for param_name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if param_name.endswith(".w"):
                param.copy_(1.0 + 0.2 * noise)
            elif param_name.split(".")[-1].startswith("b"):
                param.copy_(0.1 * noise)
            else:
                param.copy_(0.3 * noise)
    for param_name, param in model.named_parameters():
        tensors[f"{name}.param.{param_name}"] = param.detach().clone()
    return model


def tokens_for(name: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(sum(map(ord, name)) + 1)
    return torch.randint(0, D_VOCAB, (BATCH, POS), generator=generator)


def record(case: str, model_name: str, **values: torch.Tensor) -> None:
    cases[case] = {"model": model_name, "keys": sorted(values), "file": FILE}
    for key, value in values.items():
        tensors[f"{case}.{key}"] = value.detach().clone().contiguous()


def record_cache(case: str, model_name: str, model: HookedTransformer, tokens, **kwargs) -> None:
    """Logits and every activation of TransformerLens's cache, under its names."""
    logits, cache = model.run_with_cache(tokens, **kwargs)
    values = {"tokens": tokens, "logits": logits}
    if kwargs.get("attention_mask") is not None:
        values["attention_mask"] = kwargs["attention_mask"]
    values |= {f"cache.{hook}": act for hook, act in cache.items()}
    record(case, model_name, **values)


def shortformer_cases() -> None:
    for name in ("attn_only_shortformer", "solu_shortformer", "gelu_shortformer"):
        model = build(name)
        record_cache(name, name, model, tokens_for(name))
        record_cache(
            f"{name}_left_padded", name, model, tokens_for(name), attention_mask=LEFT_PADDED
        )


def forward_cases() -> None:
    for name in ("solu_standard", "solu_lnpre", "solu_plain", "xielu"):
        record_cache(name, name, build(name), tokens_for(name))
    model = build("bidirectional")
    record_cache("bidirectional", "bidirectional", model, tokens_for("bidirectional"))
    for label, mask in (("right", RIGHT_PADDED), ("left", LEFT_PADDED)):
        record_cache(
            f"bidirectional_{label}_padded",
            "bidirectional",
            model,
            tokens_for("bidirectional"),
            attention_mask=mask,
        )
    model = build("causal")
    record_cache(
        "causal_left_padded", "causal", model, tokens_for("causal"), attention_mask=LEFT_PADDED
    )


def opt_in_cases() -> None:
    """Shortformer models with every opt-in hook on (split inputs repeat the positions along
    heads) and the errors for hooks whose switch is off."""
    model = build("solu_shortformer")
    errors = {}
    for hook in ("attn.hook_result", "hook_q_input", "hook_k_input", "hook_attn_in", "hook_mlp_in"):
        name = f"blocks.1.{hook}"
        try:
            model.add_hook(name, lambda act, hook: None)
        except AssertionError as error:
            errors[name] = str(error)
    cases["opt_in_errors"] = {"model": "solu_shortformer", "errors": errors}
    model.set_use_attn_result(True)
    model.set_use_split_qkv_input(True)
    model.set_use_hook_mlp_in(True)
    record_cache("solu_shortformer_opt_in", "solu_shortformer", model, tokens_for("opt_in"))
    model.set_use_split_qkv_input(False)
    model.set_use_attn_in(True)
    record_cache("solu_shortformer_attn_in", "solu_shortformer", model, tokens_for("opt_in"))


def component_cases() -> None:
    """Each component called as TransformerLens calls it, positional arguments in its order."""
    generator = torch.Generator().manual_seed(7)
    x = torch.randn(BATCH, POS, 16, generator=generator)
    additive = torch.zeros(BATCH, 1, 1, POS)
    additive[0, ..., 1] = -1e4  # a key hidden from row 0
    past_mask = torch.tensor([[0, 1, 1, 1, 1, 1, 1, 1, 1], [1] * 9])  # 2 cached + 7 new
    for name in ("solu_shortformer", "causal", "rotary", "bidirectional"):
        model = build(f"{name}") if name != "solu_shortformer" else build("solu_shortformer")
        tokens = tokens_for(f"components_{name}")
        block = model.blocks[0]
        values = {"tokens": tokens, "x": x, "additive": additive, "past_mask": past_mask}
        values["embed"] = model.embed(tokens)
        values["ln1"] = block.ln1(x)
        values["ln_final"] = model.ln_final(x)
        values["attn"] = block.attn(x, x, x)
        values["attn_additive"] = block.attn(x, x, x, None, additive)
        values["attn_masked"] = block.attn(x, x, x, None, None, LEFT_PADDED)
        values["mlp"] = block.mlp(x)
        values["block"] = block(x)
        values["block_masked"] = block(x, None, None, LEFT_PADDED)
        values["block1"] = model.blocks[1](x)
        if name != "rotary":
            values["pos_embed"] = model.pos_embed(tokens)
            values["pos_embed_offset"] = model.pos_embed(tokens, 3)
            values["pos_embed_masked"] = model.pos_embed(tokens, 0, LEFT_PADDED)
            values["pos_embed_offset_masked"] = model.pos_embed(tokens, 2, past_mask)
        if name == "solu_shortformer":
            pos = model.pos_embed(tokens)
            values["block_shortformer"] = block(x, pos)
            values["block_shortformer_masked"] = block(x, pos, None, LEFT_PADDED)
        record(f"components_{name}", name, **values)


def kv_cache_cases() -> None:
    """TransformerLens's test_kv_cache patterns: a prefix, then new tokens with a mask that
    hides one of them; a left-padded batch decoded one token at a time; the full forwards."""
    for name in ("causal", "rotary", "attn_only_shortformer"):
        model = build(name)
        tokens = tokens_for(f"kv_{name}")
        pre, post = tokens[:, :3], tokens[:, 3:]
        post_mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 1]])
        cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", BATCH)
        model(pre, attention_mask=torch.ones_like(pre), past_kv_cache=cache)
        masked_logits = model(post, attention_mask=post_mask, past_kv_cache=cache)
        full_mask = torch.cat([torch.ones_like(pre), post_mask], dim=1)
        full_masked_logits = model(tokens, attention_mask=full_mask)

        cache = HookedTransformerKeyValueCache.init_cache(model.cfg, "cpu", BATCH)
        prompt_mask = LEFT_PADDED[:, :4]
        steps = [model(tokens[:, :4], attention_mask=prompt_mask, past_kv_cache=cache)]
        for position in range(4, POS):
            one = torch.ones(BATCH, 1, dtype=torch.long)
            steps.append(model(tokens[:, position : position + 1], attention_mask=one,
                               past_kv_cache=cache))  # fmt: skip
        stepped_logits = torch.cat(steps, dim=1)
        grown_mask = torch.cat([prompt_mask, torch.ones(BATCH, POS - 4, dtype=torch.long)], 1)
        full_padded_logits = model(tokens, attention_mask=grown_mask)
        record(
            f"kv_{name}",
            name,
            tokens=tokens,
            post_mask=post_mask,
            masked_logits=masked_logits,
            full_masked_logits=full_masked_logits,
            prompt_mask=prompt_mask,
            stepped_logits=stepped_logits,
            full_padded_logits=full_padded_logits,
        )


def processing_cases() -> None:
    """``process_weights_`` (fold_ln, center_writing_weights, center_unembed, and the value
    biases) on a SoLU model: mlp.ln folds into W_out. (Shortformer models are not processed:
    TransformerLens's from_pretrained skips fold_ln, center_writing_weights and
    center_unembed for them.)"""
    for name in ("solu_standard",):
        model = build(name)
        tokens = tokens_for(f"processed_{name}")
        before = model(tokens).log_softmax(-1)
        model.process_weights_(fold_ln=True, center_writing_weights=True, center_unembed=True)
        values = {"tokens": tokens, "log_probs_before": before, "logits": model(tokens)}
        values |= {f"state.{key}": value for key, value in model.state_dict().items()
                   if not key.endswith(("attn.mask", "attn.IGNORE"))}  # fmt: skip
        record(f"processed_{name}", name, **values)
        cases[f"processed_{name}"]["normalization_type"] = model.cfg.normalization_type


def activation_cases() -> None:
    grid = torch.linspace(-8.0, 8.0, 401)
    rows = grid.reshape(1, 401).repeat(3, 1) * torch.tensor([[0.1], [1.0], [3.0]])
    values = {"grid": grid, "rows": rows}
    for name, fn in activation_functions.SUPPORTED_ACTIVATIONS.items():
        values[f"{name}.grid"] = fn(grid)
        values[f"{name}.rows"] = fn(rows)
    for name in ("gelu_new", "gelu_fast", "solu", "gelu_pytorch_tanh", "xielu"):
        values[f"utils.{name}"] = getattr(utils, name)(rows)
    record("activations", "", **values)
    cases["activations"]["supported"] = sorted(activation_functions.SUPPORTED_ACTIVATIONS)
    cases["activations"]["act_fn_dict"] = sorted(utils.ACTIVATION_FN_DICT)


FILE = ""  # the file the current group's tensors go to


def main() -> None:
    global FILE
    torch.set_grad_enabled(False)
    groups = {
        "shortformer": shortformer_cases,
        "forward": forward_cases,
        "opt_in": opt_in_cases,
        "calls": component_cases,
        "kv_cache": kv_cache_cases,
        "processing": processing_cases,
        "activations": activation_cases,
    }
    for group, write_cases in groups.items():
        FILE = f"components_{group}.safetensors"
        write_cases()
        save_file(tensors, HERE / FILE)
        tensors.clear()
    configs = {name: {k: v for k, v in cfg.items()} for name, cfg in CONFIGS.items()}
    (HERE / "components.json").write_text(
        json.dumps({"configs": configs, "cases": cases}, indent=1, sort_keys=True) + "\n"
    )


if __name__ == "__main__":
    main()
