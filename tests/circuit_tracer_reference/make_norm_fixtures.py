"""Reference graphs and feature interventions written by circuit-tracer 0.5.0 for every norm x
transcoder input hook x skip connection, for ``tests/circuits/test_circuits_reference_norms.py``.

Run it in circuit-tracer's environment (see ``make_fixtures.py``)::

    cd /tmp && /work/ct-venv/bin/python \
        /work/main/tests/circuit_tracer_reference/make_norm_fixtures.py

The grid (``CASES``): four norms, each on a model of the family that has it,

- ``ln``: GPT-2-shaped (LayerNorm with a bias, learned positions), weights not processed;
- ``ln_nobias``: the same with every LayerNorm bias zero;
- ``rms``: Llama-shaped (RMSNorm, rotary, grouped-query attention, gated MLP);
- ``rms_offset``: Gemma-2-shaped (RMSNorm scaling by ``1 + w``, sandwich norms, soft caps):
  interp's config has ``rmsnorm_uses_offset`` and holds ``w``; TransformerLens 3 (which
  circuit-tracer runs on) holds ``1 + w`` in a plain RMSNorm, as its Gemma loader writes it;

times the transcoders' input hook (``ln2.hook_normalized``, ``hook_resid_mid``,
``hook_mlp_in``; all write ``hook_mlp_out``) times a skip connection or none, with JumpReLU
transcoders. TransformerLens 3's LayerNorm ``hook_normalized`` is before the weight and
bias: that is what a circuit-tracer transcoder set reading ``ln2.hook_normalized`` reads.
Plus ``ln_ln2_skip_long``: the ``ln`` / ``ln2.hook_normalized`` / skip case on a 64-token
prompt, cut at 64 feature nodes.

It writes ``norms/<norm>/`` (``config.json``: interp's config; ``model.safetensors``: interp's
weights; ``skip/`` and ``noskip/``: circuit-tracer's transcoder folders, whose input hook each
case sets) and ``norms/<case>.pt`` (graph, prune masks, scores, the prompt's transcoder
activations and ``feature_intervention``'s logits for ``make_graph_files_fixtures.RUNS``'
frozen, unfrozen and constrained runs). It is deterministic.
"""

from __future__ import annotations

import json

import torch
from circuit_tracer import attribute
from circuit_tracer.utils.caching import load_transcoders_from_cache
from make_fixtures import (
    COMMON,
    FAMILIES,
    HERE,
    graph_record,
    random_weights,
    replacement_model,
)
from make_fixtures import write_transcoders as write_layer_transcoders
from make_graph_files_fixtures import RUNS, interventions_for, stored
from safetensors.torch import save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig

FOLDER = HERE / "norms"
PROMPT = [0, 5, 17, 3, 29, 11, 40, 8]
LONG_PROMPT = [0] + [(7 * i + 3) % (COMMON["d_vocab"] - 1) + 1 for i in range(63)]
NORMS = {  # norm: (TransformerLens 3 config, interp's extra config fields)
    "ln": (dict(FAMILIES["gpt2"][0], n_ctx=64), {}),
    "ln_nobias": (dict(FAMILIES["gpt2"][0], n_ctx=64), {}),
    "rms": (dict(FAMILIES["llama"][0], n_ctx=64), {}),
    "rms_offset": (dict(FAMILIES["gemma2"][0], n_ctx=64), {"rmsnorm_uses_offset": True}),
}
HOOKS = {"ln2": "ln2.hook_normalized", "mid": "hook_resid_mid", "mlpin": "hook_mlp_in"}
CASES = [f"{norm}_{hook}_{skip}" for norm in NORMS for hook in HOOKS for skip in ("skip", "noskip")]
RUN_NAMES = ("frozen", "unfrozen", "constrained_all", "constrained_last")


def norm_weights(norm: str, seed: int) -> tuple[dict, dict]:
    """(TransformerLens 3's weights, interp's weights) of the ``norm`` model."""
    cfg = dict(NORMS[norm][0], use_hook_mlp_in=True)
    state = random_weights(HookedTransformer(HookedTransformerConfig(**cfg)), seed)
    if norm == "ln_nobias":
        state = {k: torch.zeros_like(v) if k.endswith((".b",)) and "ln" in k else v
                 for k, v in state.items()}  # fmt: skip
    ours = dict(state)
    if norm == "rms_offset":  # TransformerLens 3 holds 1 + w; interp holds w
        ours = {k: v - 1 if k.endswith(".w") else v for k, v in state.items()}
    return state, ours


def write_case(name: str, model, prompt: list[int], **kwargs) -> None:
    print(name, end=": ")
    graph = attribute(torch.tensor(prompt), model, **kwargs)
    tokens = torch.tensor(prompt)
    clean_logits, clean_activations = model.get_activations(tokens)
    chosen = interventions_for(clean_activations)["steer"]
    runs = {}
    for run in RUN_NAMES:
        logits, activations = model.feature_intervention(tokens, chosen, **RUNS[run][1])
        runs[run] = {"logits": logits.clone(), "activations": activations.clone()}
    record = graph_record(graph, kwargs) | {
        "clean_logits": clean_logits.clone(),
        "clean_activations": clean_activations.clone(),
        "interventions": stored(chosen),
        "runs": runs,
    }
    torch.save(record, FOLDER / f"{name}.pt")


def main() -> None:
    torch.set_grad_enabled(True)
    for seed, (norm, (cfg, extra)) in enumerate(NORMS.items()):
        folder = FOLDER / norm
        folder.mkdir(parents=True, exist_ok=True)
        cfg = dict(cfg, use_hook_mlp_in=True)
        (folder / "config.json").write_text(json.dumps(dict(cfg, **extra), indent=2))
        state, ours = norm_weights(norm, 300 + seed)
        save_file(ours, str(folder / "model.safetensors"))
        for skip in ("skip", "noskip"):
            hooks = ("hook_resid_mid", "hook_mlp_out")  # the input hook is set by each case
            write_layer_transcoders(folder / skip, "jumprelu", skip == "skip", hooks, 400 + seed)
            for short, hook in HOOKS.items():
                transcoders, _ = load_transcoders_from_cache(
                    skip, cache_dir=folder, device=torch.device("cpu"), lazy_decoder=False
                )
                transcoders.feature_input_hook = hook
                model = replacement_model(cfg, state, transcoders)
                write_case(f"{norm}_{short}_{skip}", model, PROMPT, batch_size=64)
                if (norm, short, skip) == ("ln", "ln2", "skip"):
                    write_case(
                        "ln_ln2_skip_long", model, LONG_PROMPT, batch_size=64, max_feature_nodes=64
                    )


if __name__ == "__main__":
    main()
