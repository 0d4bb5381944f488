"""TransformerLens 2.18 reference for ``ActivationCache.apply_ln_to_stack`` and ``logit_attrs``
on stacks of every shape: one component axis, none (``[batch, pos, d_model]``), several
(``[layer, head, batch, pos, d_model]``), with and without a position axis, for each
``pos_slice`` / ``batch_slice`` / ``has_batch_dim`` / ``recompute_ln`` combination; and the
stack builders (``accumulated_resid``, ``decompose_resid``, ``stack_head_results``,
``stack_neuron_results``, ``get_full_resid_decomposition``) with ``apply_ln=True`` at each
``pos_slice``.

Run with the TransformerLens 2.18 environment, from the repository root:

    /work/tl218-venv/bin/python tests/tl218_reference/make_cache.py

Writes, next to this script, for each model (``ln``: LayerNorm, ``rms``: RMSNorm):
``cache_<model>.safetensors`` (the state dict under ``param.``, the tokens, TL's logits, the
input stacks under ``stack.`` and each case's result under ``case.``) and one
``cache_cases.json`` (the configs and, per case, the method, the stack, the arguments and how
TransformerLens computed the reference).

Where TransformerLens's own call is wrong (it slices ``batch_slice`` on axis 1 of the stack,
which is the batch axis only when the stack has exactly one component axis; a ``[batch]``
tokens tensor against a stack with a position axis broadcasts against the positions), the
reference is TransformerLens's result on the equivalent one-component-axis stack (or
``tokens[:, None]``), and the case says so in ``reference``.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file
from transformer_lens import HookedTransformer, HookedTransformerConfig

HERE = Path(__file__).resolve().parent
N_LAYERS, N_HEADS, BATCH, POS, D_VOCAB = 2, 2, 3, 6, 20
CONFIG = dict(
    n_layers=N_LAYERS,
    d_model=16,
    n_heads=N_HEADS,
    d_head=8,
    d_mlp=32,
    d_vocab=D_VOCAB,
    n_ctx=8,
    act_fn="gelu",
    seed=0,
)


def build(normalization_type: str) -> HookedTransformer:
    """A random model whose norms and biases are not at their initial values, except
    ``ln_final.w`` (1): TransformerLens's ``logit_attrs`` leaves it out of the token
    directions (it expects it folded into ``W_U``), interp folds it in."""
    model = HookedTransformer(
        HookedTransformerConfig(**CONFIG, normalization_type=normalization_type)
    )
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            noise = torch.randn(param.shape, generator=generator)
            if name == "ln_final.w":
                continue
            if name.endswith(".w"):
                param.copy_(1 + 0.3 * noise)
            elif name.endswith(".b") or name.split(".")[-1].startswith("b_"):
                param.copy_(0.1 * noise)
    return model.eval()


def encode(value):
    """A slice argument as JSON: a (start, stop) tuple becomes {"tuple": [...]}."""
    return {"tuple": list(value)} if isinstance(value, tuple) else value


def trailing_axes(pos_slice, batch_slice, has_batch_dim: bool, cache_has_batch: bool) -> int:
    """How many batch/position axes a stack has before ``d_model``."""
    return int(cache_has_batch and has_batch_dim) + int(not isinstance(pos_slice, int))


def one_component_axis(stack: torch.Tensor, n_trailing: int) -> torch.Tensor:
    """The stack with its leading (component) axes merged into exactly one."""
    return stack.reshape(-1, *stack.shape[stack.ndim - 1 - n_trailing :])


def reference_apply_ln(cache, stack, kwargs, cache_has_batch):
    """TransformerLens's apply_ln_to_stack, on the one-component-axis form when its
    batch_slice would land on the wrong axis, and with recompute_ln (whose loop over the first
    axis fails on ``[batch, d_model]`` and ``[component, d_model]`` stacks: those get a
    one-long axis, which a per-vector norm does not see). Returns (result, how)."""
    n_trailing = trailing_axes(
        kwargs["pos_slice"], kwargs["batch_slice"], kwargs["has_batch_dim"], cache_has_batch
    )
    n_leading = stack.ndim - 1 - n_trailing
    wrong_axis = kwargs["batch_slice"] is not None and kwargs["has_batch_dim"]
    if stack.ndim == 1 and not kwargs["recompute_ln"]:  # TL slices axis 1 even if identity
        return cache.apply_ln_to_stack(stack, **{**kwargs, "has_batch_dim": False}), "direct"
    if not kwargs["recompute_ln"] and (n_leading == 1 or not wrong_axis):
        return cache.apply_ln_to_stack(stack, **kwargs), "direct"
    flat = one_component_axis(stack, n_trailing)
    how = "one component axis"
    if flat.ndim == 2:
        flat, how = flat[:, None], how + ", one-long batch axis"
    result = cache.apply_ln_to_stack(flat, **kwargs)
    shape = (*stack.shape[:n_leading], *stack.shape[n_leading:-1], result.shape[-1])
    if kwargs["has_batch_dim"] and kwargs["batch_slice"] is not None:
        shape = (*stack.shape[:n_leading], *result.shape[1:])
    return result.reshape(shape), how


def reference_logit_attrs(cache, stack, tokens, incorrect, kwargs, cache_has_batch):
    """TransformerLens's logit_attrs (see ``reference_apply_ln`` for the stack's form); a
    ``[batch]`` tokens tensor against a stack with positions is given as ``tokens[:, None]``."""
    n_trailing = trailing_axes(
        kwargs["pos_slice"], kwargs["batch_slice"], kwargs["has_batch_dim"], cache_has_batch
    )
    hows = []
    batch_kept = (
        cache_has_batch and kwargs["has_batch_dim"] and not isinstance(kwargs["batch_slice"], int)
    )
    if isinstance(tokens, torch.Tensor) and tokens.ndim == 1 and n_trailing == 2 and batch_kept:
        tokens = tokens[:, None]
        incorrect = None if incorrect is None else incorrect[:, None]
        hows.append("tokens[:, None]")
    n_leading = stack.ndim - 1 - n_trailing
    wrong_axis = kwargs["batch_slice"] is not None and kwargs["has_batch_dim"]
    if n_leading != 1 and wrong_axis:
        flat = one_component_axis(stack, n_trailing)
        result = cache.logit_attrs(flat, tokens, incorrect, **kwargs)
        result = result.reshape(*stack.shape[:n_leading], *result.shape[1:])
        hows.append("one component axis")
    elif stack.ndim == 1:  # TL slices axis 1 even if identity
        result = cache.logit_attrs(stack, tokens, incorrect, **{**kwargs, "has_batch_dim": False})
    else:
        result = cache.logit_attrs(stack, tokens, incorrect, **kwargs)
    return result, ", ".join(hows) or "direct"


def stacks_of(cache, batch_of_one: bool):
    """The input stacks, by name, with the pos_slice each was built with."""
    heads = cache.stack_head_results(layer=-1)
    heads_last = cache.stack_head_results(layer=-1, pos_slice=-1)
    stacks = {
        "accumulated": (cache.accumulated_resid(incl_mid=True), None),
        "accumulated_last": (cache.accumulated_resid(incl_mid=True, pos_slice=-1), -1),
        "stream": (cache["resid_post", N_LAYERS - 1], None),
        "stream_last": (cache["resid_post", N_LAYERS - 1][..., -1, :], -1),
        "stream_middle": (cache["resid_post", N_LAYERS - 1][..., 1:4, :], (1, 4)),
        "heads": (heads.reshape(N_LAYERS, N_HEADS, *heads.shape[1:]), None),
        "heads_last": (heads_last.reshape(N_LAYERS, N_HEADS, *heads_last.shape[1:]), -1),
    }
    if not batch_of_one:
        example = cache.accumulated_resid(incl_mid=True)[:, 1]
        stacks["accumulated_example_1"] = (example, None)
    return {name: (stack.detach().clone(), pos) for name, (stack, pos) in stacks.items()}


def ln_cases(stacks, batch_of_one: bool):
    """(stack name, kwargs) for apply_ln_to_stack."""
    batch_slices = [None] if batch_of_one else [None, 1, [0, 2]]
    for name, (_, pos_slice) in stacks.items():
        if name == "accumulated_example_1":
            for layer in (None, 1):
                yield name, dict(layer=layer, pos_slice=None, batch_slice=1, has_batch_dim=False)
            continue
        for layer, mlp_input in ((None, False), (1, False), (1, True)):
            yield name, dict(layer=layer, mlp_input=mlp_input, pos_slice=pos_slice)
        for batch_slice in batch_slices[1:]:
            yield name, dict(layer=None, pos_slice=pos_slice, batch_slice=batch_slice)
        for batch_slice in batch_slices[::2]:
            yield (
                name,
                dict(layer=None, pos_slice=pos_slice, batch_slice=batch_slice, recompute_ln=True),
            )


def logit_cases(stacks, batch_of_one: bool):
    """(stack name, kwargs, tokens name, incorrect tokens name) for logit_attrs."""
    for name, (_, pos_slice) in stacks.items():
        if name == "accumulated_example_1":
            kwargs = dict(pos_slice=None, batch_slice=1, has_batch_dim=False)
            yield name, kwargs, "int", None
            yield name, kwargs, "per_position_1", "wrong_per_position_1"
            continue
        yield name, dict(pos_slice=pos_slice), "int", None
        if batch_of_one:
            if pos_slice is None:
                yield name, dict(pos_slice=None), "per_position_0", "wrong_per_position_0"
            continue
        yield name, dict(pos_slice=pos_slice), "per_example", "wrong_per_example"
        if pos_slice is None:
            yield name, dict(pos_slice=None), "per_position", "wrong_per_position"
            yield name, dict(pos_slice=None, batch_slice=1), "per_position_1", None
        yield name, dict(pos_slice=pos_slice, batch_slice=[0, 2]), "per_example_02", None


def stack_method_cases(batch_of_one: bool):
    """(method, kwargs) for the cache's stack builders with ``apply_ln``, at each pos_slice."""
    for pos_slice in (None, -1, (1, 4)):
        common = dict(apply_ln=True, pos_slice=pos_slice)
        if not (batch_of_one and pos_slice == -1):  # TL's recompute_ln fails on [stage, d_model]
            yield "accumulated_resid", dict(layer=None, incl_mid=True, **common)
        yield "accumulated_resid", dict(layer=1, mlp_input=True, **common)
        yield "decompose_resid", dict(layer=None, **common)
        yield "decompose_resid", dict(layer=1, mlp_input=True, **common)
        yield "stack_head_results", dict(layer=-1, incl_remainder=True, **common)
        yield "stack_head_results", dict(layer=1, **common)
        yield "stack_neuron_results", dict(layer=-1, neuron_slice=(0, 8), **common)
        yield "get_full_resid_decomposition", dict(layer=None, expand_neurons=False, **common)
        yield "get_full_resid_decomposition", dict(layer=1, mlp_input=True, **common)


def token_inputs() -> dict:
    """The answer (and wrong answer) tokens of the logit_attrs cases, by name."""
    generator = torch.Generator().manual_seed(2)
    answers = torch.randint(0, D_VOCAB, (BATCH, POS), generator=generator)
    wrong = torch.randint(0, D_VOCAB, (BATCH, POS), generator=generator)
    return {
        "int": 7,
        "per_example": answers[:, 0],
        "wrong_per_example": wrong[:, 0],
        "per_position": answers,
        "wrong_per_position": wrong,
        "per_position_0": answers[0],
        "wrong_per_position_0": wrong[0],
        "per_position_1": answers[1],
        "wrong_per_position_1": wrong[1],
        "per_example_02": answers[[0, 2], 0],
    }


def main() -> None:
    torch.manual_seed(0)
    tokens = torch.randint(0, D_VOCAB, (BATCH, POS), generator=torch.Generator().manual_seed(0))
    token_sets = token_inputs()
    manifest = {"config": CONFIG, "models": {}, "cases": []}
    for model_name, normalization in (("ln", "LN"), ("rms", "RMS")):
        model = build(normalization)
        tensors = {f"param.{k}": v.detach().clone() for k, v in model.state_dict().items()}
        tensors["tokens"] = tokens
        manifest["models"][model_name] = {"normalization_type": normalization}
        for cache_name, batch_of_one in (("batch", False), ("one", True)):
            run_tokens = tokens[:1] if batch_of_one else tokens
            with torch.no_grad():
                logits, cache = model.run_with_cache(run_tokens)
            if batch_of_one:
                cache = cache.remove_batch_dim()
            tensors[f"logits.{cache_name}"] = logits
            stacks = stacks_of(cache, batch_of_one)
            for name, (stack, _) in stacks.items():
                tensors[f"stack.{cache_name}.{name}"] = stack
            for index, (name, kwargs) in enumerate(ln_cases(stacks, batch_of_one)):
                full = dict(
                    mlp_input=False, batch_slice=None, has_batch_dim=True, recompute_ln=False
                )
                full.update(kwargs)
                with torch.no_grad():
                    result, how = reference_apply_ln(
                        cache, stacks[name][0], full, cache_has_batch=not batch_of_one
                    )
                key = f"case.{cache_name}.ln.{index}"
                tensors[key] = result.detach().clone()
                manifest["cases"].append(
                    dict(
                        model=model_name,
                        cache=cache_name,
                        method="apply_ln_to_stack",
                        stack=name,
                        kwargs={k: encode(v) for k, v in kwargs.items()},
                        result=key,
                        reference=how,
                    )
                )
            for index, (name, kwargs, good, bad) in enumerate(logit_cases(stacks, batch_of_one)):
                full = dict(batch_slice=None, has_batch_dim=True)
                full.update(kwargs)
                with torch.no_grad():
                    result, how = reference_logit_attrs(
                        cache,
                        stacks[name][0],
                        token_sets[good],
                        None if bad is None else token_sets[bad],
                        full,
                        cache_has_batch=not batch_of_one,
                    )
                key = f"case.{cache_name}.logit.{index}"
                tensors[key] = result.detach().clone()
                manifest["cases"].append(
                    dict(
                        model=model_name,
                        cache=cache_name,
                        method="logit_attrs",
                        stack=name,
                        kwargs={k: encode(v) for k, v in kwargs.items()},
                        tokens=good,
                        incorrect_tokens=bad,
                        result=key,
                        reference=how,
                    )
                )
            for index, (method, kwargs) in enumerate(stack_method_cases(batch_of_one)):
                with torch.no_grad():
                    result = getattr(cache, method)(**kwargs)
                key = f"case.{cache_name}.method.{index}"
                tensors[key] = result.detach().clone()
                manifest["cases"].append(
                    dict(
                        model=model_name,
                        cache=cache_name,
                        method=method,
                        stack="-",
                        kwargs={k: encode(v) for k, v in kwargs.items()},
                        result=key,
                        reference="direct",
                    )
                )
        for name, value in token_sets.items():
            tensors[f"tokens.{name}"] = torch.as_tensor(value)
        tensors = {k: v.contiguous().clone() for k, v in tensors.items()}
        save_file(tensors, HERE / f"cache_{model_name}.safetensors")
    (HERE / "cache_cases.json").write_text(json.dumps(manifest, indent=1) + "\n")


if __name__ == "__main__":
    main()
