"""The backward pass of the frozen local replacement model, written out.

With every attention pattern and norm scale frozen and each MLP replaced by its transcoder's
skip path, the model is linear in its residual stream, so the gradient of a row (a
feature's encoder vector at its transcoder input, or a logit direction after ``ln_final``)
is a fixed sequence of matrix products: per layer, the transposed skip matrix and norm
scalings, then attention's ``W_O``, the transposed pattern and ``W_V``. ``FrozenBackward``
runs that sequence for many rows at once, in the layouts that make each step one large
matrix product, and only as far as the rows reach:

- a row of layer ``l`` needs nothing above ``l``: rows are sorted by layer, highest first,
  and each layer works on the rows that have started;
- in a causal model nothing flows to a position from later ones, so a batch whose rows
  sit at positions below ``q`` is computed on the first ``q`` positions only.

On a tensor-parallel model (``from_pretrained(..., tp_size=N)``, every rank running the
same rows), attention's step is each rank's own heads (its shards of ``W_O`` and ``W_V``,
its heads of the frozen pattern) and one all-reduce of the ``[rows, q, d_model]`` gradient
a layer sums them: no weight is gathered, and every rank yields the whole gradients.

It gives what ``torch.autograd.grad`` gives through ``ReplacementModel.linearized()``'s
graph (``attribution.rows.autograd_gradients``, which stays for the configurations this file
does not cover: ``unsupported`` names them) up to float rounding, in ``dtype``.

Example:
    >>> from interp.circuits import ReplacementModel, ensure_tokenized
    >>> tcs = "shakespeare-char-transcoders"
    >>> replacement = ReplacementModel.from_pretrained("shakespeare-char", tcs)
    >>> tokens = ensure_tokenized("ROMEO:", replacement)   # [pos]
    >>> layers, positions = torch.tensor([3, 1]), torch.tensor([5, 2])   # sorted, highest first
    >>> inject = torch.randn(2, 128)   # [rows, d_model]
    >>> with replacement.linearized() as run:
    ...     final = replacement.run_linearized(tokens[None])
    ...     backward = FrozenBackward(replacement, run, torch.float32)
    ...     for sink, grad in backward.gradients(layers, positions, inject):
    ...         print(sink, tuple(grad.shape))   # [rows started, q, d_model] at `sink`
    2 (1, 6, 128)
    1 (1, 6, 128)
    0 (2, 6, 128)
    4 (2, 6, 128)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.components.norms import LayerNorm, applied_weight

if TYPE_CHECKING:
    from interp.circuits.replacement_model import LinearizedRun, ReplacementModel

# Transcoder input hooks this file can transpose back to the residual stream.
_INPUT_HOOKS = ("mlp.hook_in", "ln2.hook_normalized", "hook_mlp_in", "hook_resid_mid")


def unsupported(model: ReplacementModel) -> str | None:
    """Why ``FrozenBackward`` cannot run ``model`` (None when it can)."""
    cfg = model.cfg
    if cfg.use_attn_in or cfg.use_split_qkv_input:
        return "per-head attention inputs (use_attn_in / use_split_qkv_input)"
    hook = model.feature_input_hook
    if hook not in _INPUT_HOOKS or (hook == "hook_resid_mid" and cfg.parallel_attn_mlp):
        return f"transcoders reading {hook!r}"
    if any(point.has_hooks for point in model.model.hook_dict.values()):
        return "hooks attached to the model (their effect on gradients is autograd's to follow)"
    if getattr(model.model, "acts_to_saes", None):
        return "SAEs spliced into the model"
    return None


def tensor_parallel(model: ReplacementModel) -> Any:
    """The model's ``TPGroup`` when it is tensor-parallel, else None."""
    return getattr(model.model, "tp", None)


class _Norm:
    """A frozen norm as the linear map its backward pass is: ``grad * w / scale``, then
    centred for a layer norm (identity for ``nn.Identity``)."""

    def __init__(
        self, norm: nn.Module, scale: Tensor | None, dtype: torch.dtype, through_weight: bool
    ) -> None:
        self.identity = isinstance(norm, nn.Identity)
        self.centred = isinstance(norm, LayerNorm)
        if self.identity:
            return
        weight = applied_weight(norm) if through_weight else None
        factor = scale[0].to(dtype).reciprocal()  # [pos, 1]
        self.factor = factor if weight is None else factor * weight.to(dtype)  # [pos, d or 1]

    def transpose(self, grad: Float[Tensor, "n q d_model"]) -> Float[Tensor, "n q d_model"]:
        if self.identity:
            return grad
        grad = grad * self.factor[: grad.shape[1]]
        return grad - grad.mean(-1, keepdim=True) if self.centred else grad


class _Layer:
    """One block's frozen pieces, in ``dtype`` and in the layouts the products want."""

    def __init__(self, model: ReplacementModel, run: LinearizedRun, index: int, dtype: torch.dtype):
        block, cfg = model.blocks[index], model.cfg
        prefix = f"blocks.{index}."

        def norm(name: str, through_weight: bool = True) -> _Norm:
            module = getattr(block, name, None)
            module = nn.Identity() if module is None else module
            scale = run.frozen.get(f"{prefix}{name}.hook_scale")
            return _Norm(module, scale, dtype, through_weight)

        self.parallel = cfg.parallel_attn_mlp
        self.ln1, self.ln1_post, self.ln2_post = norm("ln1"), norm("ln1_post"), norm("ln2_post")
        attn = block.attn
        # This rank's heads on a tensor-parallel model (every head otherwise).
        h, d_head, d_model = attn.W_O.shape
        W_V = attn.key_value_weights()[2].to(dtype)  # [kv_heads, d_model, d_head]
        self.n_heads, self.n_kv_heads, self.d_head = h, W_V.shape[0], d_head
        self.tp = tensor_parallel(model)
        # [h, k, q]: a value at key k reaches query q with weight pattern[h, q, k].
        pattern = run.frozen[f"{prefix}attn.hook_pattern"][0]  # every head: hooks see all
        if self.tp is not None:
            layout = attn.tp_layouts["hook_pattern"]
            pattern = pattern.narrow(0, layout.starts[self.tp.rank], layout.count)
        self.pattern_t = pattern.to(dtype).transpose(1, 2).contiguous()
        self.W_O_t = attn.W_O.to(dtype).reshape(h * d_head, d_model).T  # [d_model, h*d_head]
        self.W_V_t = W_V.permute(0, 2, 1).reshape(-1, d_model)  # [kv_heads*d_head, d_model]
        skip = model.transcoders.skip_matrix(index)  # skip(x) == x @ skip
        self.skip_t = None if skip is None else skip.to(dtype).T
        hook = model.feature_input_hook  # the transcoder reads T(residual): T's transpose
        if hook in ("hook_mlp_in", "hook_resid_mid"):
            self.input_norm = _Norm(nn.Identity(), None, dtype, True)
        else:  # ln2's output (mlp.hook_in), or its normalised input before the weight
            # (ln2.hook_normalized, as circuit-tracer reads it: ReplacementModel.transcoder_io)
            self.input_norm = norm("ln2", through_weight=hook == "mlp.hook_in")
        self.output_norm = self.ln2_post if model.feature_output_hook == "mlp.hook_out" else None

    def output_transpose(self, resid_post: Float[Tensor, "n q d_model"]) -> Tensor:
        """The gradient at the transcoder output, from the one at ``resid_post``."""
        return resid_post if self.output_norm is None else self.output_norm.transpose(resid_post)

    def block_transpose(
        self, resid_post: Float[Tensor, "n q d_model"], grad_in: Float[Tensor, "n q d_model"] | None
    ) -> Float[Tensor, "n q d_model"]:
        """The gradient at ``resid_pre``, from the ones at ``resid_post`` and at the
        transcoder input (None: zero)."""
        from_mlp = 0.0 if grad_in is None else self.input_norm.transpose(grad_in)
        if self.parallel:  # attention and MLP both read resid_pre
            return resid_post + self.attention_transpose(resid_post) + from_mlp
        resid_mid = resid_post + from_mlp
        return resid_mid + self.attention_transpose(resid_mid)

    def attention_transpose(self, grad: Float[Tensor, "n q d_model"]) -> Tensor:
        """The gradient at ``resid_pre`` through attention, from the one at its output."""
        n, q, d_model = grad.shape
        h, kv, d_head = self.n_heads, self.n_kv_heads, self.d_head
        grad = self.ln1_post.transpose(grad)
        grad_z = grad.reshape(n * q, d_model) @ self.W_O_t  # [n*q, h*d_head]
        grad_z = grad_z.view(n, q, h, d_head).permute(2, 1, 0, 3).reshape(h, q, n * d_head)
        grad_v = torch.bmm(self.pattern_t[:, :q, :q], grad_z)  # [h, k, n*d_head]
        if kv != h:  # query heads h*r .. h*r + r - 1 read key/value head h
            grad_v = grad_v.view(kv, h // kv, q, n * d_head).sum(1)
        grad_v = grad_v.view(kv, q, n, d_head).permute(2, 1, 0, 3).reshape(n * q, kv * d_head)
        grad = grad_v @ self.W_V_t  # [n*q, d_model]: this rank's heads' share when split
        if self.tp is not None:
            dist.all_reduce(grad, group=self.tp.group)
        return self.ln1.transpose(grad.view(n, q, d_model))


class FrozenBackward:
    """Batched gradients of the frozen replacement model (see the module docstring)."""

    @torch.no_grad()
    def __init__(self, model: ReplacementModel, run: LinearizedRun, dtype: torch.dtype) -> None:
        cfg = model.cfg
        self.n_layers, self.d_model, self.dtype = cfg.n_layers, cfg.d_model, dtype
        self.causal = cfg.attention_dir == "causal"
        self.n_pos = run.frozen["blocks.0.attn.hook_pattern"].shape[-1]
        self.layers = [_Layer(model, run, index, dtype) for index in range(cfg.n_layers)]
        self.ln_final = _Norm(
            model.ln_final, run.frozen.get("ln_final.hook_scale"), dtype, through_weight=True
        )

    @torch.no_grad()
    def gradients(
        self,
        layers: Int[Tensor, " k"],
        positions: Int[Tensor, " k"],
        inject: Float[Tensor, "k d_model"],
    ) -> Iterator[tuple[int, Float[Tensor, "n q d_model"]]]:
        """Row ``i`` injects ``inject[i]`` at (``layers[i]``, ``positions[i]``): the
        transcoder input of that layer, or after ``ln_final`` for layer ``n_layers``.
        ``layers`` must be sorted, highest first. Yields (sink, gradient) from the top
        layer down: sink ``l < n_layers`` is layer ``l``'s transcoder output, sink
        ``n_layers`` the embedding (``hook_embed``). A gradient covers the first ``n`` rows
        (the later ones start below and are zero there) and the first ``q`` positions (the
        rest are zero)."""
        if (layers[:-1] < layers[1:]).any():
            raise ValueError("FrozenBackward.gradients needs rows sorted by layer, highest first.")
        k, d_model = len(layers), self.d_model
        q = int(positions.max()) + 1 if self.causal else self.n_pos
        inject = inject.to(self.dtype)
        grad = inject.new_zeros(k, q, d_model)  # at the current layer's resid_post
        started = [int((layers >= index).sum()) for index in range(self.n_layers + 1)]
        top = int(layers[0])
        if top == self.n_layers:
            n = started[top]
            final = inject.new_zeros(n, q, d_model)
            final[torch.arange(n, device=final.device), positions[:n]] = inject[:n]
            grad[:n] = self.ln_final.transpose(final)
            top -= 1
        for index in range(top, -1, -1):
            layer = self.layers[index]
            above, n = started[index + 1], started[index]  # rows started higher up; and here
            out = layer.output_transpose(grad[:above])  # at the transcoder output
            if above:
                yield index, out
            grad_in = None  # at the transcoder input: through the skip path, and injected
            if n > above or (layer.skip_t is not None and above):
                grad_in = inject.new_zeros(n, q, d_model)
                if layer.skip_t is not None:
                    grad_in[:above] = out @ layer.skip_t
                new = torch.arange(above, n, device=grad.device)
                grad_in[new, positions[above:n]] = inject[above:n]
            grad[:n] = layer.block_transpose(grad[:n], grad_in)
        yield self.n_layers, grad
