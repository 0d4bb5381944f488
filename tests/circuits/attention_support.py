"""What the attention-attribution tests share: a family's random checkpoint with random skip
transcoders, and the frozen forward pass, written with the model's own hooks, that the
float64 oracles differentiate (independent of ``interp.circuits.attention``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from interp import HookedTransformer
from interp.circuits import ReplacementModel, TranscoderSet
from interp.sae import SAE, SAEConfig


def family_replacement(
    save: Any, folder: Path, dtype: torch.dtype, seed: int = 1
) -> ReplacementModel:
    """The checkpoint ``save(folder)`` writes, loaded in ``dtype``, with random skip
    transcoders on its MLPs (as ``test_every_family_checkpoint_equals_autograd``)."""
    save(folder)
    model = HookedTransformer.from_pretrained_no_processing(folder, tokenizer=None, dtype=dtype)
    cfg = model.cfg
    torch.manual_seed(seed)
    saes = []
    for layer in range(cfg.n_layers):
        sae = SAE(SAEConfig(
            d_in=cfg.d_model, d_sae=32, architecture="skip_transcoder",
            hook_name=f"blocks.{layer}.mlp.hook_in", hook_name_out=f"blocks.{layer}.mlp.hook_out",
            apply_b_dec_to_input=False, dtype=str(dtype).removeprefix("torch."),
        ))  # fmt: skip
        with torch.no_grad():
            sae.W_enc.normal_(0, 1.5 / cfg.d_model**0.5)
            sae.W_dec.normal_(0, 0.3)
            sae.W_skip.normal_(0, 1 / cfg.d_model**0.5)
            sae.b_dec.normal_(0, 0.1)
        saes.append(sae)
    return ReplacementModel.from_model(model, TranscoderSet.from_saes(saes))


class FrozenForward:
    """The frozen replacement model run by hooks: patterns, every norm scale and each MLP's
    output (but for its skip path's change) at their clean values, chosen heads' ``z`` too
    (their OV path removed), and a vector added at a transcoder output or the embedding."""

    def __init__(self, replacement: ReplacementModel, tokens: Tensor) -> None:
        self.replacement, self.tokens = replacement, tokens
        self.clean: dict[str, Tensor] = {}
        self.without: dict[int, Tensor] = {}  # target -> its value in the frozen run
        names = [
            n for n in replacement.model.hook_dict
            if n.endswith(("hook_pattern", "hook_scale", "attn.hook_z"))
        ]  # fmt: skip

        def keep(value: Tensor, hook: Any) -> None:
            self.clean[hook.name] = value.detach().clone()

        def at_input(layer: int, x: Tensor) -> None:
            self.clean[f"in{layer}"] = x.detach().clone()

        def at_output(layer: int, out: Tensor) -> None:
            self.clean[f"out{layer}"] = out.detach().clone()

        with (
            torch.no_grad(),
            replacement.transcoder_io(at_input, at_output, [(n, keep) for n in names]),
        ):
            self.clean["final"] = replacement.model.ln_final(
                replacement.model(tokens[None], stop_at_layer=replacement.cfg.n_layers)
            ).detach()

    def run(
        self,
        removed: Iterable[tuple[int, int]],
        at_outputs: dict[int, tuple[int, Tensor]],
        at_embed: tuple[int, Tensor] | None,
    ) -> tuple[list[Tensor], Tensor]:
        """(each transcoder's input [pos, d_model], ln_final's output [pos, d_model])."""
        replacement, clean = self.replacement, self.clean
        removed = set(removed)
        inputs: dict[int, Tensor] = {}

        def frozen(value: Tensor, hook: Any) -> Tensor:
            if hook.name.endswith("attn.hook_z"):
                layer = int(hook.name.split(".")[1])
                value = value.clone()
                for head in range(value.shape[2]):
                    if (layer, head) in removed:
                        value[:, :, head] = clean[hook.name][:, :, head]
                return value
            return clean[hook.name]

        def embed(value: Tensor, hook: Any) -> Tensor:
            value = value.clone()
            if at_embed is not None:
                value[0, at_embed[0]] += at_embed[1]
            return value

        def at_input(layer: int, x: Tensor) -> None:
            inputs[layer] = x[0]

        def at_output(layer: int, out: Tensor) -> Tensor:
            tcs = replacement.transcoders
            new = clean[f"out{layer}"].clone()
            if tcs.skip_connection:
                new = (
                    new
                    + tcs.skip(layer, inputs[layer][None])
                    - tcs.skip(layer, clean[f"in{layer}"])
                )
            if layer in at_outputs:
                pos, vector = at_outputs[layer]
                new[0, pos] += vector
            return new

        hooks = [(n, frozen) for n in replacement.model.hook_dict if n in clean]
        hooks.append(("hook_embed", embed))
        with torch.no_grad(), replacement.transcoder_io(at_input, at_output, hooks):
            final = replacement.model.ln_final(
                replacement.model(self.tokens[None], stop_at_layer=replacement.cfg.n_layers)
            )
        return [inputs[layer] for layer in range(replacement.cfg.n_layers)], final[0]


def source_writes(
    replacement: ReplacementModel, graph: Any, source: int
) -> tuple[dict[int, tuple[int, Tensor]], tuple[int, Tensor] | None]:
    """What a feature or token node writes: (at transcoder outputs {layer: (pos, vector)},
    at the embedding (pos, vector) or None), from the transcoders' and model's weights."""
    n_features = len(graph.selected_features)
    tokens_start = n_features + graph.n_layers * graph.n_pos
    tcs = replacement.transcoders
    if source < n_features:
        active = int(graph.selected_features[source])
        layer, pos, feature = graph.active_features[active].tolist()
        act = graph.activation_values[active].to(replacement.cfg.dtype)
        writes = {
            t: (pos, act * tcs.decoder_vectors(layer, torch.tensor([feature]), t)[0].detach())
            for t in tcs.writes_to(layer)
        }
        return writes, None
    assert source >= tokens_start, "the oracle takes feature and token sources"
    pos = source - tokens_start
    return {}, (pos, replacement.model.W_E[graph.input_tokens[pos]].detach())


def target_value(
    replacement: ReplacementModel, graph: Any, target: int, inputs: list[Tensor], final: Tensor
) -> Tensor:
    """What a feature target reads (encoder . transcoder input) or a logit target's demeaned
    unembedding . ln_final's output at the last position."""
    n_features = len(graph.selected_features)
    if target < n_features:
        active = int(graph.selected_features[target])
        layer, pos, feature = graph.active_features[active].tolist()
        encoder = replacement.transcoders.encoder_vectors(layer, torch.tensor([feature]))[0]
        return encoder.detach().to(inputs[layer].dtype) @ inputs[layer][pos]
    vocab_idx = graph.logit_targets[target - graph.adjacency_matrix.shape[0]].vocab_idx
    W_U = replacement.model.W_U.detach()
    return (W_U[:, vocab_idx] - W_U.mean(-1)) @ final[-1]


def oracle_edge(frozen: FrozenForward, graph: Any, target: int, source: int, removed: set) -> float:
    """The edge with the heads in ``removed`` (their OV path) taken out: the target's change
    when the source's vector is added, every head in ``removed`` frozen, in the frozen model
    (a difference quotient, exact for this linear map up to rounding)."""
    replacement = frozen.replacement
    at_outputs, at_embed = source_writes(replacement, graph, source)
    with_source = target_value(
        replacement, graph, target, *frozen.run(removed, at_outputs, at_embed)
    )
    if target not in frozen.without:  # without the source: the same whatever is removed
        frozen.without[target] = target_value(replacement, graph, target, *frozen.run((), {}, None))
    return float(with_source - frozen.without[target])
