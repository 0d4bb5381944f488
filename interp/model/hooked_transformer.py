"""HookedTransformer: a GPT-2-family model whose every activation is a named hook point.

This file is the model and its forward pass; the rest of TransformerLens's methods come from
one mixin per concept: tokens in and out (``tokenization``), ``generate`` (``generation``),
the stacked weights ``W_Q``... (``weight_views``), ``from_pretrained``... (``constructors``)
and the ``set_use_*`` switches (``opt_in_hooks``). The loss is ``loss``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch
from jaxtyping import Float, Int
from torch import Tensor, nn

from interp.cache.kv_cache import KeyValueCache
from interp.components import Embed, PosEmbed, TransformerBlock, Unembed, make_norm
from interp.components.tl_buffers import check_model_tl_buffers
from interp.config import HookedTransformerConfig
from interp.hooks import HookedRootModule, HookPoint, NamesFilter
from interp.model.constructors import ModelLoadingMixin
from interp.model.devices import DevicePlacementMixin
from interp.model.generation import GenerationMixin
from interp.model.loss import lm_cross_entropy_loss
from interp.model.opt_in_hooks import OptInHooksMixin
from interp.model.tokenization import PaddingSide, TokenizationMixin
from interp.model.weight_views import WeightViewsMixin
from interp.tokenizers import get_tokenizer
from interp.utils.device_map import module_device
from interp.utils.devices import check_device

__all__ = ["HookedTransformer", "ReturnType", "TextOrTokens", "lm_cross_entropy_loss"]

TextOrTokens = str | Sequence[str] | Int[Tensor, "batch pos"] | Int[Tensor, " pos"]
ReturnType = Literal["logits", "loss", "both", None]
_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.")


class HookedTransformer(
    TokenizationMixin,
    GenerationMixin,
    WeightViewsMixin,
    ModelLoadingMixin,
    OptInHooksMixin,
    DevicePlacementMixin,
    HookedRootModule,
):
    """A GPT-2-style transformer with TransformerLens's hook names and parameter layout.

    Example:
        >>> cfg = HookedTransformerConfig(n_layers=2, d_model=64, n_ctx=32, d_head=16)
        >>> model = HookedTransformer(cfg, tokenizer=interp.get_tokenizer("gpt2"))   # random
        >>> model.cfg.d_vocab   # from the tokenizer
        50257
        >>> logits, cache = model.run_with_cache("The cat sat on the mat")   # BOS + 6 tokens
        >>> cache["pattern", 0].shape   # [batch, head, query_pos, key_pos]
        torch.Size([1, 4, 7, 7])
    """

    def __init__(
        self,
        cfg: HookedTransformerConfig | dict[str, Any],
        tokenizer: Any = None,
    ) -> None:
        super().__init__()
        cfg = HookedTransformerConfig.unwrap(cfg)
        self.cfg = cfg
        if tokenizer is None and cfg.d_vocab == -1:  # as TransformerLens: d_vocab from it
            tokenizer = cfg.tokenizer_name
        self.tokenizer = get_tokenizer(tokenizer) if tokenizer is not None else None
        cfg.set_d_vocab_from_tokenizer(self.tokenizer)
        if cfg.use_hook_tokens:
            self.hook_tokens = HookPoint()  # [batch, pos]: the input token ids
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        # rotary rotates q and k instead; alibi biases the scores
        if cfg.positional_embedding_type not in ("rotary", "alibi"):
            self.pos_embed = PosEmbed(cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList(TransformerBlock(cfg, index) for index in range(cfg.n_layers))
        self.ln_final = make_norm(cfg)
        self.unembed = Unembed(cfg)
        self.init_weights()
        self.setup()
        if cfg.n_devices > 1:  # TransformerLens's split of the blocks over the devices
            self.move_model_modules_to_device()
        elif cfg.device is not None:
            self.to(cfg.device)

    def to(self, *args: Any, **kwargs: Any) -> HookedTransformer:
        """``nn.Module.to``, with a clear error for a device this machine does not have
        (``"gpu"``, ``"cuda"`` without CUDA) before anything moves."""
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, (str, torch.device)) or (
            isinstance(device, int) and not isinstance(device, bool)
        ):
            checked = check_device(device)
            if self.cfg.n_devices > 1:  # laid over devices until now: on one from here
                self.cfg.device, self.cfg.n_devices = str(checked), 1
        return super().to(*args, **kwargs)

    def cuda(self, device: torch.device | int | None = None) -> HookedTransformer:
        """``nn.Module.cuda``, with a clear error when CUDA is not available."""
        check_device("cuda" if device is None else device)
        return super().cuda(device)

    def init_weights(self) -> None:
        """GPT-2's initialisation: weights ~ N(0, init_range), biases 0, norms 1; with
        ``cfg.tie_word_embeddings``, ``W_U`` is a copy of ``W_E.T``."""
        generator = (
            torch.Generator().manual_seed(self.cfg.seed) if self.cfg.seed is not None else None
        )
        for name, param in self.named_parameters():
            if name.split(".")[-1].lstrip("_").startswith("W_"):  # GQA's _W_K/_W_V too
                with torch.no_grad():
                    values = torch.randn(param.shape, generator=generator, dtype=torch.float32)
                    param.copy_(values * self.cfg.init_range)
        if self.cfg.tie_word_embeddings:
            with torch.no_grad():
                self.unembed.W_U.copy_(self.embed.W_E.T)

    @property
    def device(self) -> torch.device:
        return self.embed.W_E.device

    def load_state_dict(
        self, state_dict: Mapping[str, Any], strict: bool = True, assign: bool = False
    ):
        """``nn.Module.load_state_dict``, which also takes TransformerLens 2.x's state dicts
        as they are: their attention buffers (``mask``, ``IGNORE``, ``rotary_sin``,
        ``rotary_cos``; see ``interp.components.tl_buffers``) are checked against what this
        model computes, every layer's before any weight is copied, and then dropped.

        Example:
            >>> model.load_state_dict(model.state_dict())   # strict, as in TL: buffers too
            <All keys matched successfully>
        """
        check_model_tl_buffers(self, state_dict)
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    # ------------------------------------------------------------------------ forward
    def forward(
        self,
        input: TextOrTokens | Float[Tensor, "batch pos d_model"],
        return_type: ReturnType = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
        start_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        shortformer_pos_embed: Float[Tensor, "batch pos d_model"] | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        stop_at_layer: int | None = None,
        past_kv_cache: KeyValueCache | None = None,
    ) -> Any:
        """Run the model on text, tokens, or (with ``start_at_layer``) a residual stream;
        the arguments are TransformerLens's, in its order.

        Returns logits [batch, pos, d_vocab], the mean next-token loss (or per token,
        [batch, pos - 1], with ``loss_per_token``), both, or None. With ``stop_at_layer=k``
        returns the residual stream entering block k, [batch, pos, d_model].
        ``attention_mask`` (1 = token, 0 = padding) supports left-padded batches; text is
        padded on ``padding_side`` (default ``model.tokenizer.padding_side``) and masked.
        A shortformer model started at a layer adds ``shortformer_pos_embed`` to its
        queries and keys (default: the embeddings of the tokens' positions, as the full
        forward computes them; TransformerLens adds none unless it is passed).
        """
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError(
                f"return_type must be 'logits', 'loss', 'both' or None, got {return_type!r}."
            )
        start = self._layer_index(start_at_layer, "start_at_layer", default=0)
        stop = self._layer_index(stop_at_layer, "stop_at_layer", default=self.cfg.n_layers)
        past_len = past_kv_cache.length if past_kv_cache is not None else 0
        if start_at_layer is None:
            residual, tokens, shortformer_pos_embed, attention_mask = self.input_to_embed(
                input, prepend_bos, padding_side, attention_mask, past_kv_cache
            )
        else:
            residual = self._check_residual(input, start_at_layer)
            if tokens is not None:
                tokens = self.check_tokens(tokens)
            if attention_mask is not None:
                attention_mask = self.check_attention_mask(
                    attention_mask, residual.shape[0], residual.shape[1], past_len
                )
            if past_kv_cache is not None:  # the cache remembers the padding, as with tokens
                new = residual.new_ones(residual.shape[:2], dtype=torch.long)
                attention_mask = self._extend_cached_mask(past_kv_cache, attention_mask, new)
            if shortformer_pos_embed is None and self.cfg.positional_embedding_type == (
                "shortformer"
            ):
                positions_like = residual[..., 0]  # [batch, pos]: what pos_embed reads of tokens
                shortformer_pos_embed = self.pos_embed(positions_like, past_len, attention_mask)
        key_padding_mask = (
            attention_mask.bool()
            if attention_mask is not None and not attention_mask.all()
            else None
        )
        positions = self.token_positions(attention_mask, past_len, residual.shape[1], residual)

        for index in range(start, stop):
            # Laid over devices: the residual and what goes with it move to the block's
            # device, once per boundary (``to`` the same device returns the tensor itself).
            device = module_device(self.blocks[index], residual.device)
            if device != residual.device:
                residual, shortformer_pos_embed, key_padding_mask, positions = _moved(
                    device, residual, shortformer_pos_embed, key_padding_mask, positions
                )
            residual = self.blocks[index](
                residual,
                shortformer_pos_embed,
                past_kv_cache[index] if past_kv_cache is not None else None,
                key_padding_mask=key_padding_mask,
                positions=positions,
            )
        if stop_at_layer is not None:
            return residual
        # runs for return_type=None too, so its hooks fire
        residual = self.ln_final(residual.to(module_device(self.ln_final, residual.device)))
        if return_type is None:
            return None

        # [batch, pos, d_vocab]
        logits = self.unembed(residual.to(module_device(self.unembed, residual.device)))
        if return_type == "logits":
            return logits
        if tokens is None:
            raise ValueError("return_type='loss' with start_at_layer needs tokens=.")
        tokens, attention_mask = _moved(logits.device, tokens, attention_mask)
        loss = lm_cross_entropy_loss(logits, tokens, attention_mask, loss_per_token)
        return loss if return_type == "loss" else (logits, loss)

    def input_to_embed(
        self,
        input: TextOrTokens,
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        past_kv_cache: KeyValueCache | None = None,
    ) -> tuple[
        Float[Tensor, "batch pos d_model"],
        Int[Tensor, "batch pos"],
        Float[Tensor, "batch pos d_model"] | None,
        Int[Tensor, "batch all_pos"] | None,
    ]:
        """The residual stream entering block 0 (``hook_tokens`` with ``cfg.use_hook_tokens``,
        ``hook_embed`` and ``hook_pos_embed`` fire), as TransformerLens returns it:
        ``(residual, tokens, shortformer_pos_embed, attention_mask)``.
        ``shortformer_pos_embed`` is the position embeddings of a shortformer model (added to
        queries and keys, not to the residual) and None for other models; the mask covers
        cached plus new positions and is None when nothing is padded.
        ``forward(residual, start_at_layer=0, attention_mask=...)`` resumes the pass.

        Example:
            >>> shakespeare = interp.load_model("shakespeare-char")   # one token a character
            >>> residual, tokens, _, mask = shakespeare.input_to_embed(["Hi there", "Hello"])
            >>> residual.shape   # [batch, pos, d_model]
            torch.Size([2, 8, 128])
            >>> mask   # "Hello" padded to the length of "Hi there"
            tensor([[1, 1, 1, 1, 1, 1, 1, 1],
                    [1, 1, 1, 1, 1, 0, 0, 0]])
        """
        past_len = past_kv_cache.length if past_kv_cache is not None else 0
        if isinstance(input, (str, list, tuple)):
            if attention_mask is not None:
                raise ValueError(
                    "Pass attention_mask with token ids, not with text: text is padded and "
                    "masked for you."
                )
            tokens, attention_mask = self._tokenize(input, prepend_bos, padding_side)
            tokens = self.check_tokens(tokens, past_len)
        else:
            tokens = self.check_tokens(input, past_len)
        if attention_mask is not None:
            attention_mask = self.check_attention_mask(
                attention_mask, tokens.shape[0], tokens.shape[1], past_len
            )
        if past_kv_cache is not None:
            attention_mask = self._extend_cached_mask(past_kv_cache, attention_mask, tokens)
        if self.cfg.use_hook_tokens:
            tokens = self.hook_tokens(tokens)
        embed = self.hook_embed(self.embed(tokens))  # [batch, pos, d_model]
        if self.cfg.positional_embedding_type in ("rotary", "alibi"):
            return embed, tokens, None, attention_mask
        # Without padding every row has the same positions: one [pos, d_model] slice,
        # broadcast (not copied) over the batch.
        pos_embed = self.hook_pos_embed(self.pos_embed(tokens, past_len, attention_mask))
        if self.cfg.positional_embedding_type == "shortformer":
            return embed, tokens, pos_embed, attention_mask
        return embed + pos_embed, tokens, None, attention_mask

    def _check_residual(self, residual: Any, start_at_layer: int) -> Tensor:
        """The residual stream fed with ``start_at_layer``, or an error saying what it must be."""
        expected = f"a float tensor [batch, pos, d_model={self.cfg.d_model}]"
        if not isinstance(residual, Tensor) or not residual.is_floating_point():
            got = (
                f"a {residual.dtype} tensor of shape {tuple(residual.shape)}"
                if isinstance(residual, Tensor)
                else type(residual).__name__
            )
            raise TypeError(
                f"start_at_layer={start_at_layer} expects the residual stream, {expected} "
                f"(e.g. cache['resid_pre', {start_at_layer}]), got {got}; token ids and text "
                "go in without start_at_layer."
            )
        if residual.ndim != 3 or residual.shape[-1] != self.cfg.d_model:
            raise ValueError(
                f"start_at_layer={start_at_layer} expects the residual stream, {expected}, "
                f"got shape {tuple(residual.shape)}."
            )
        return residual

    @staticmethod
    def token_positions(
        attention_mask: Int[Tensor, "batch all_pos"] | None,
        past_len: int,
        n_new: int,
        like: Tensor,
    ) -> Int[Tensor, "batch_or_1 pos"]:
        """The absolute position of each new token: ``past_len`` onwards ([1, pos], shared by
        every row), or with a mask over cached plus new positions, each row's count of real
        tokens before it, so left padding shifts a text to start at 0 (as Hugging Face's
        ``attention_mask.cumsum(-1) - 1``; padding gets 0). ``like`` gives the device.

        Example:
            >>> HookedTransformer.token_positions(torch.tensor([[0, 1, 1]]), 0, 3, tokens)
            tensor([[0, 0, 1]])
        """
        if attention_mask is not None:
            return (attention_mask.cumsum(dim=-1) - 1).clamp(min=0)[:, past_len:]
        return torch.arange(past_len, past_len + n_new, device=like.device)[None]

    def _layer_index(self, layer: int | None, what: str, default: int) -> int:
        if layer is None:
            return default
        n = self.cfg.n_layers
        if not -n <= layer <= n:
            raise ValueError(f"{what}={layer} is out of range for a {n}-layer model.")
        return layer % n if layer < 0 else layer

    @staticmethod
    def _extend_cached_mask(
        kv_cache: KeyValueCache, new_mask: Tensor | None, tokens: Tensor
    ) -> Tensor | None:
        """The padding mask over cached plus new positions, remembered in the cache.

        A cache whose mask already covers the new positions (``input_to_embed`` added them,
        and ``forward(residual, start_at_layer=0, past_kv_cache=...)`` resumes, as
        TransformerLens's pattern) is not extended twice.
        """
        past_len, n_new = kv_cache.length, tokens.shape[1]
        if new_mask is not None and new_mask.shape[-1] == past_len + n_new:
            new_mask = new_mask[:, past_len:]  # caller passed the whole mask
        previous = kv_cache.attention_mask
        if previous is not None and previous.shape[-1] == past_len + n_new:
            previous = previous[:, :past_len]  # these positions were added already
        if new_mask is None and previous is None:
            return None
        if new_mask is None:
            new_mask = torch.ones_like(tokens)
        if previous is None and past_len:  # nothing cached was padding
            previous = new_mask.new_ones(new_mask.shape[0], kv_cache.length)
        if previous is not None:
            new_mask = torch.cat([previous, new_mask.to(previous.device)], dim=1)
        kv_cache.attention_mask = new_mask
        return new_mask

    # -------------------------------------------------------------------- run_with_cache
    def run_with_cache(self, *model_args: Any, names_filter: NamesFilter = None, **kwargs: Any):
        """``HookedRootModule.run_with_cache``, plus early exit: with ``return_type=None`` the
        forward stops after the last block that any cached hook lives in, and the output is None.

        The default (``return_type="logits"``) runs the whole model and returns the logits, as
        TransformerLens does, so ``logits, cache = model.run_with_cache(tokens)`` ports as is.

        Example:
            >>> _, cache = model.run_with_cache(tokens, names_filter="blocks.0.hook_resid_post",
            ...                                 return_type=None)   # runs block 0 only
            >>> list(cache), _
            (['blocks.0.hook_resid_post'], None)
        """
        if kwargs.get("device") is not None:
            check_device(kwargs["device"])
        if kwargs.get("return_type", "logits") is None and kwargs.get("stop_at_layer") is None:
            kwargs["stop_at_layer"] = self.last_layer_needed(self.hook_names(names_filter))
            if kwargs["stop_at_layer"] is not None:  # the output is then a residual stream
                _, cache = super().run_with_cache(*model_args, names_filter=names_filter, **kwargs)
                return None, cache
        return super().run_with_cache(*model_args, names_filter=names_filter, **kwargs)

    def last_layer_needed(self, hook_names: Sequence[str]) -> int | None:
        """How many blocks must run to reach every named hook (None: the whole model)."""
        needed = 0
        for name in hook_names:
            if name in ("hook_tokens", "hook_embed", "hook_pos_embed"):
                continue
            match = _BLOCK_HOOK.match(name)
            if match is None:
                return None
            needed = max(needed, int(match.group(1)) + 1)
        return None if needed == self.cfg.n_layers else needed


def _moved(device: torch.device, *tensors: Tensor | None) -> tuple[Tensor | None, ...]:
    """Each tensor on ``device`` (None stays None)."""
    return tuple(tensor if tensor is None else tensor.to(device) for tensor in tensors)
