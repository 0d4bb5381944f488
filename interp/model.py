"""HookedTransformer: a GPT-2-family model whose every activation is a named hook point."""

from __future__ import annotations

import operator
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch
import torch.nn.functional as F
from jaxtyping import Float, Int
from torch import Tensor, nn
from tqdm.auto import tqdm

from interp.analysis.factored_matrix import FactoredMatrix
from interp.components import Embed, PosEmbed, TransformerBlock, Unembed, make_norm
from interp.config import HookedTransformerConfig
from interp.devices import check_device
from interp.hooks import HookedRootModule, HookPoint, NamesFilter
from interp.kv_cache import KeyValueCache
from interp.sampling import sample_next_token
from interp.tokenization import PaddingSide, TokenizationMixin
from interp.tokenizers import get_tokenizer

TextOrTokens = str | Sequence[str] | Int[Tensor, "batch pos"] | Int[Tensor, " pos"]
ReturnType = Literal["logits", "loss", "both", None]
_BLOCK_HOOK = re.compile(r"^blocks\.(\d+)\.")


class HookedTransformer(TokenizationMixin, HookedRootModule):
    """A GPT-2-style transformer with TransformerLens's hook names and parameter layout.

    Example:
        >>> model = HookedTransformer(cfg, tokenizer=interp.get_tokenizer("gpt2"))
        >>> logits, cache = model.run_with_cache("The cat sat on the mat")
        >>> cache["pattern", 0].shape   # [batch, head, query_pos, key_pos]
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
        self.embed = Embed(cfg)
        self.hook_embed = HookPoint()  # [batch, pos, d_model]
        if cfg.positional_embedding_type == "standard":  # rotary rotates q and k instead
            self.pos_embed = PosEmbed(cfg)
            self.hook_pos_embed = HookPoint()  # [batch, pos, d_model]
        self.blocks = nn.ModuleList(TransformerBlock(cfg, index) for index in range(cfg.n_layers))
        self.ln_final = make_norm(cfg)
        self.unembed = Unembed(cfg)
        self.init_weights()
        self.setup()
        if cfg.device is not None:
            self.to(cfg.device)

    def to(self, *args: Any, **kwargs: Any) -> HookedTransformer:
        """``nn.Module.to``, with a clear error for a device this machine does not have
        (``"gpu"``, ``"cuda"`` without CUDA) before anything moves."""
        device = kwargs.get("device", args[0] if args else None)
        if isinstance(device, (str, torch.device)) or (
            isinstance(device, int) and not isinstance(device, bool)
        ):
            check_device(device)
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

    def save(self, folder: str | Path) -> Path:
        """Save config, tokenizer and weights to ``folder`` in interp's native format
        (``interp.loading.native``); ``interp.loading.native.load_native`` reads it back.

        Example:
            >>> model.save("checkpoints/my-model")
        """
        from interp.loading.native import save_native

        return save_native(self, folder)

    # ------------------------------------------------------------------------ forward
    def forward(
        self,
        input: TextOrTokens | Float[Tensor, "batch pos d_model"],
        return_type: ReturnType = "logits",
        loss_per_token: bool = False,
        prepend_bos: bool | None = None,
        padding_side: PaddingSide | None = None,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
        start_at_layer: int | None = None,
        stop_at_layer: int | None = None,
        tokens: Int[Tensor, "batch pos"] | None = None,
        past_kv_cache: KeyValueCache | None = None,
    ) -> Any:
        """Run the model on text, tokens, or (with ``start_at_layer``) a residual stream.

        Returns logits [batch, pos, d_vocab], the mean next-token loss (or per token,
        [batch, pos - 1], with ``loss_per_token``), both, or None. With ``stop_at_layer=k``
        returns the residual stream entering block k, [batch, pos, d_model].
        ``attention_mask`` (1 = token, 0 = padding) supports left-padded batches; text is
        padded on ``padding_side`` (default ``model.tokenizer.padding_side``) and masked.
        """
        if return_type not in ("logits", "loss", "both", None):
            raise ValueError(
                f"return_type must be 'logits', 'loss', 'both' or None, got {return_type!r}."
            )
        start = self._layer_index(start_at_layer, "start_at_layer", default=0)
        stop = self._layer_index(stop_at_layer, "stop_at_layer", default=self.cfg.n_layers)
        if start_at_layer is None:
            residual, tokens, _, attention_mask = self.input_to_embed(
                input, prepend_bos, padding_side, attention_mask, past_kv_cache
            )
        else:
            residual = self._check_residual(input, start_at_layer)
            if tokens is not None:
                tokens = self.check_tokens(tokens)
            if attention_mask is not None:
                past_len = past_kv_cache.length if past_kv_cache is not None else 0
                attention_mask = self.check_attention_mask(
                    attention_mask, residual.shape[0], residual.shape[1], past_len
                )
            if past_kv_cache is not None:  # the cache remembers the padding, as with tokens
                new = residual.new_ones(residual.shape[:2], dtype=torch.long)
                attention_mask = self._extend_cached_mask(past_kv_cache, attention_mask, new)
        key_padding_mask = (
            attention_mask.bool()
            if attention_mask is not None and not attention_mask.all()
            else None
        )
        past_len = past_kv_cache.length if past_kv_cache is not None else 0
        positions = self.token_positions(attention_mask, past_len, residual.shape[1], residual)

        for index in range(start, stop):
            past_kv = past_kv_cache[index] if past_kv_cache is not None else None
            residual = self.blocks[index](residual, key_padding_mask, past_kv, positions=positions)
        if stop_at_layer is not None:
            return residual
        residual = self.ln_final(residual)  # runs for return_type=None too, so its hooks fire
        if return_type is None:
            return None

        logits = self.unembed(residual)  # [batch, pos, d_vocab]
        if return_type == "logits":
            return logits
        if tokens is None:
            raise ValueError("return_type='loss' with start_at_layer needs tokens=.")
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
        None,
        Int[Tensor, "batch all_pos"] | None,
    ]:
        """The residual stream entering block 0 (``hook_embed`` and ``hook_pos_embed`` fire),
        as TransformerLens returns it: ``(residual, tokens, shortformer_pos_embed,
        attention_mask)``. ``shortformer_pos_embed`` is always None (no model here adds
        positions inside attention); the mask covers cached plus new positions and is None
        when nothing is padded. ``forward(residual, start_at_layer=0, attention_mask=...)``
        resumes the pass.

        Example:
            >>> residual, tokens, _, mask = model.input_to_embed(["Hi there", "Hello"])
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
        residual = self.embed_tokens(tokens, attention_mask, past_len)
        return residual, tokens, None, attention_mask

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

    def embed_tokens(
        self,
        tokens: Int[Tensor, "batch pos"],
        attention_mask: Int[Tensor, "batch all_pos"] | None = None,
        past_len: int = 0,
    ) -> Float[Tensor, "batch pos d_model"]:
        """Token embeddings (``hook_embed``), plus learned position embeddings
        (``hook_pos_embed``) unless the model is rotary; left padding shifts each text to
        start at position 0."""
        embed = self.hook_embed(self.embed(tokens))
        if self.cfg.positional_embedding_type == "rotary":
            return embed
        batch, n_new = tokens.shape
        positions = self.token_positions(attention_mask, past_len, n_new, tokens)
        # Without padding every row has the same positions: one [1, pos, d_model] lookup,
        # broadcast (not copied) over the batch.
        pos_embed = self.pos_embed(positions).expand(batch, n_new, -1)
        return embed + self.hook_pos_embed(pos_embed)

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
        """The padding mask over cached plus new positions, remembered in the cache."""
        if new_mask is not None and new_mask.shape[-1] == kv_cache.length + tokens.shape[1]:
            new_mask = new_mask[:, kv_cache.length :]  # caller passed the whole mask
        if new_mask is None and kv_cache.attention_mask is None:
            return None
        if new_mask is None:
            new_mask = torch.ones_like(tokens)
        if kv_cache.attention_mask is not None:
            new_mask = torch.cat([kv_cache.attention_mask, new_mask.to(tokens.device)], dim=1)
        kv_cache.attention_mask = new_mask
        return new_mask

    # -------------------------------------------------------------------- run_with_cache
    def run_with_cache(self, *model_args: Any, names_filter: NamesFilter = None, **kwargs: Any):
        """``HookedRootModule.run_with_cache``, plus early exit: with ``return_type=None`` the
        forward stops after the last block that any cached hook lives in, and the output is None.

        The default (``return_type="logits"``) runs the whole model and returns the logits, as
        TransformerLens does, so ``logits, cache = model.run_with_cache(tokens)`` ports as is.

        Example:
            >>> _, cache = model.run_with_cache(tokens, names_filter="blocks.1.hook_resid_post",
            ...                                 return_type=None)   # runs blocks 0 and 1 only
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
            if name in ("hook_embed", "hook_pos_embed"):
                continue
            match = _BLOCK_HOOK.match(name)
            if match is None:
                return None
            needed = max(needed, int(match.group(1)) + 1)
        return None if needed == self.cfg.n_layers else needed

    # ------------------------------------------------------------------------ generate
    @torch.no_grad()
    def generate(
        self,
        input: str | Sequence[str] | Int[Tensor, "batch pos"],
        max_new_tokens: int = 10,
        do_sample: bool = True,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        stop_at_eos: bool = True,
        use_past_kv_cache: bool = True,
        prepend_bos: bool | None = None,
        seed: int | None = None,
        return_type: Literal["input", "str", "tokens"] = "input",
        verbose: bool = False,
        attention_mask: Int[Tensor, "batch pos"] | None = None,
    ) -> str | list[str] | Int[Tensor, "batch pos"]:
        """Continue text or tokens. Greedy when ``do_sample=False``; otherwise samples with
        temperature, top-k and top-p. Hooks attached to the model fire at every step (those of
        ``ln_final`` see only the last position, the only one whose logits are computed).

        Returns text for text input (``return_type="input"``) and tokens for tokens. A batch
        of texts is padded on the left; left-padded token ids take their ``attention_mask``.

        Example:
            >>> model.generate("ROMEO:", max_new_tokens=50, temperature=0.8, seed=0)
        """
        if isinstance(input, (str, list, tuple)):
            if attention_mask is not None:
                raise ValueError(
                    "Pass attention_mask with token ids, not with text: text is padded and "
                    "masked for you."
                )
            tokens, mask = self._tokenize(input, prepend_bos, padding_side="left")
            tokens = self.check_tokens(tokens)
            mask = mask.to(self.device) if mask is not None else None
        else:
            tokens = self.check_tokens(input)
            mask = attention_mask
            if mask is not None:
                mask = self.check_attention_mask(mask, tokens.shape[0], tokens.shape[1])
                if (mask[:, -1] == 0).any():
                    raise ValueError(
                        "generate needs left padding (each row's last token real): "
                        "attention_mask has 0 in its last column."
                    )
        # Where each row's text starts, after left padding and BOS, for decoding.
        n_padding = (mask == 0).sum(dim=1).tolist() if mask is not None else [0] * len(tokens)
        bos_prepended = not isinstance(input, Tensor) and (
            prepend_bos
            if prepend_bos is not None
            else self.cfg.default_prepend_bos and self.tokenizer.bos_token_id is not None
        )
        prompt_starts = [n + int(bos_prepended) for n in n_padding]
        if tokens.shape[1] + max_new_tokens > self.cfg.n_ctx:
            raise ValueError(
                f"{tokens.shape[1]} prompt tokens + max_new_tokens={max_new_tokens} exceed "
                f"n_ctx={self.cfg.n_ctx}; shorten the prompt or generate fewer tokens."
            )
        generator = torch.Generator(self.device).manual_seed(seed) if seed is not None else None
        eos = getattr(self.tokenizer, "eos_token_id", None)
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=self.device)
        kv_cache = KeyValueCache.empty(self.cfg.n_layers) if use_past_kv_cache else None
        step_input, all_mask = tokens, mask
        last_block = self.cfg.n_layers
        for _ in tqdm(range(max_new_tokens), disable=not verbose):
            if kv_cache is not None:
                residual = self(
                    step_input,
                    attention_mask=mask,
                    past_kv_cache=kv_cache,
                    stop_at_layer=last_block,
                )
                mask = None  # the cache remembers the padding
            else:
                residual = self(tokens, attention_mask=all_mask, stop_at_layer=last_block)
            # Only the last position's logits are needed: [batch, d_vocab].
            logits = self.unembed(self.ln_final(residual[:, -1:]))[:, -1]
            next_token = sample_next_token(logits, do_sample, temperature, top_k, top_p, generator)
            if stop_at_eos and eos is not None:
                next_token = torch.where(finished, eos, next_token)
                finished |= next_token == eos
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
            step_input = next_token[:, None]
            if all_mask is not None:
                all_mask = F.pad(all_mask, (0, 1), value=1)
            if stop_at_eos and eos is not None and finished.all():
                break
        if return_type == "tokens" or (return_type == "input" and isinstance(input, Tensor)):
            return tokens
        texts = [
            self.to_string(row[start:]) for row, start in zip(tokens, prompt_starts, strict=True)
        ]
        return texts[0] if isinstance(input, str) else texts

    # ----------------------------------------------------------------- opt-in hook points
    def _set_opt_in_hooks(self, flag: str, use: bool) -> None:
        setattr(self.cfg, flag, use)
        for block in self.blocks:
            block.sync_opt_in_hooks()
        self.setup()

    def set_use_attn_result(self, use: bool) -> None:
        """Turn ``attn.hook_result`` (each head's output, [batch, pos, n_heads, d_model]) on/off."""
        self._set_opt_in_hooks("use_attn_result", use)

    def set_use_split_qkv_input(self, use: bool) -> None:
        """Turn ``hook_q_input``/``hook_k_input``/``hook_v_input`` (per-head inputs) on/off."""
        self._set_opt_in_hooks("use_split_qkv_input", use)

    def set_use_attn_in(self, use: bool) -> None:
        """Turn ``hook_attn_in`` (the per-head attention input) on/off."""
        self._set_opt_in_hooks("use_attn_in", use)

    def set_use_hook_mlp_in(self, use: bool) -> None:
        """Turn ``hook_mlp_in`` (the MLP's input) on/off."""
        self._set_opt_in_hooks("use_hook_mlp_in", use)

    # --------------------------------------------------------------------- weight views
    def _stack(self, path: str) -> Tensor:
        """One weight of every block (a parameter, or a property such as grouped-query
        attention's expanded ``W_K``), stacked on a leading layer axis."""
        return torch.stack([operator.attrgetter(path)(block) for block in self.blocks])

    @property
    def W_E(self) -> Float[Tensor, "d_vocab d_model"]:
        return self.embed.W_E

    @property
    def W_pos(self) -> Float[Tensor, "n_ctx d_model"]:
        if self.cfg.positional_embedding_type != "standard":
            raise ValueError(
                f"This model has {self.cfg.positional_embedding_type} position embeddings: "
                "no W_pos (positions rotate the queries and keys inside attention)."
            )
        return self.pos_embed.W_pos

    @property
    def W_U(self) -> Float[Tensor, "d_model d_vocab"]:
        return self.unembed.W_U

    @property
    def b_U(self) -> Float[Tensor, " d_vocab"]:
        return self.unembed.b_U

    def tokens_to_residual_directions(
        self, tokens: str | int | Int[Tensor, "..."]
    ) -> Float[Tensor, "... d_model"]:
        """Each token's unembedding direction, its column of ``W_U``: a token's text, an id
        or a 1-element tensor gives [d_model]; a tensor of ids [...] gives [..., d_model].
        Fold the final LayerNorm first (``from_pretrained``'s default) or the directions
        miss its scale.

        Example:
            >>> model.tokens_to_residual_directions(" Mary").shape
            torch.Size([768])
        """
        if isinstance(tokens, str):
            return self.W_U[:, self.to_single_token(tokens)]
        if isinstance(tokens, int) and not isinstance(tokens, bool):
            tokens = torch.tensor(tokens)
        if (
            not isinstance(tokens, Tensor)
            or tokens.dtype == torch.bool
            or tokens.is_floating_point()
            or tokens.is_complex()
        ):
            raise TypeError(
                f"tokens must be a token's text, an id or an integer tensor of ids, got {tokens!r}."
            )
        low, high = (int(tokens.min()), int(tokens.max())) if tokens.numel() else (0, 0)
        if low < 0 or high >= self.cfg.d_vocab:
            raise ValueError(
                f"Token id {low if low < 0 else high} is outside the vocabulary "
                f"[0, {self.cfg.d_vocab}); check that the ids come from this model's tokenizer."
            )
        if tokens.numel() == 1:  # one token gives one direction, whatever the tensor's shape
            return self.W_U[:, int(tokens.item())]
        return self.W_U[:, tokens.to(self.device, torch.long)].movedim(0, -1)

    @property
    def W_Q(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_Q")

    @property
    def W_K(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_K")

    @property
    def W_V(self) -> Float[Tensor, "n_layers n_heads d_model d_head"]:
        return self._stack("attn.W_V")

    @property
    def W_O(self) -> Float[Tensor, "n_layers n_heads d_head d_model"]:
        return self._stack("attn.W_O")

    @property
    def b_Q(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_Q")

    @property
    def b_K(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_K")

    @property
    def b_V(self) -> Float[Tensor, "n_layers n_heads d_head"]:
        return self._stack("attn.b_V")

    @property
    def b_O(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stack("attn.b_O")

    @property
    def W_in(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        return self._stack("mlp.W_in")

    @property
    def W_gate(self) -> Float[Tensor, "n_layers d_model d_mlp"]:
        """The gate projections of a gated MLP (``cfg.gated_mlp``)."""
        return self._stack("mlp.W_gate")

    @property
    def W_out(self) -> Float[Tensor, "n_layers d_mlp d_model"]:
        return self._stack("mlp.W_out")

    @property
    def b_in(self) -> Float[Tensor, "n_layers d_mlp"]:
        return self._stack("mlp.b_in")

    @property
    def b_out(self) -> Float[Tensor, "n_layers d_model"]:
        return self._stack("mlp.b_out")

    # ------------------------------------------------------------- loading and processing
    @classmethod
    def from_pretrained(
        cls,
        model_name: str | Path,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        refactor_factored_attn_matrices: bool = False,
        checkpoint_index: int | None = None,
        checkpoint_value: int | None = None,
        hf_model: Any = None,
        device: torch.device | str | None = None,
        n_devices: int = 1,
        tokenizer: Any = None,
        move_to_device: bool = True,
        fold_value_biases: bool = True,
        default_prepend_bos: bool | None = None,
        default_padding_side: str | None = None,
        dtype: torch.dtype | str | None = None,
        first_n_layers: int | None = None,
    ) -> HookedTransformer:
        """A model from a TransformerLens name or hub id (``"gpt2-small"``, ``"gpt2"``,
        ``"gpt2-medium"``, ..., read from the Hugging Face cache when offline), a Hugging Face
        GPT-2 folder, a folder saved by ``save``, or ``hf_model``, an in-memory
        ``GPT2LMHeadModel``. TransformerLens 2.x's signature and defaults.

        As in TransformerLens, the weights are processed (layer norms folded, writing weights
        and unembedding centred, value biases folded): log-probabilities are unchanged and
        activations equal TransformerLens's, but logits differ from Hugging Face's by a
        per-position constant. ``from_pretrained_no_processing`` gives Hugging Face's numbers.
        See ``interp.loading.pretrained.load_pretrained``.

        Example:
            >>> model = HookedTransformer.from_pretrained("gpt2-small", device="cuda")
        """
        from interp.loading.pretrained import load_pretrained

        unsupported = {
            "checkpoint_index": (checkpoint_index, None),
            "checkpoint_value": (checkpoint_value, None),
            "n_devices": (n_devices, 1),
            "first_n_layers": (first_n_layers, None),
            "default_padding_side": (default_padding_side, None),
        }
        for name, (value, default) in unsupported.items():
            if value != default and not (name == "default_padding_side" and value == "right"):
                raise ValueError(
                    f"from_pretrained({name}={value!r}) is not supported yet (interp loads the "
                    f"final GPT-2-family weights on one device); leave {name} at {default!r}."
                )
        model = load_pretrained(
            model_name,
            device=device if move_to_device else "cpu",
            dtype=dtype,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
            tokenizer=tokenizer,
            hf_model=hf_model,
        )
        if default_prepend_bos is not None:
            model.cfg.default_prepend_bos = default_prepend_bos
        return model

    @classmethod
    def from_pretrained_no_processing(
        cls,
        model_name: str | Path,
        fold_ln: bool = False,
        center_writing_weights: bool = False,
        center_unembed: bool = False,
        refactor_factored_attn_matrices: bool = False,
        fold_value_biases: bool = False,
        **kwargs: Any,
    ) -> HookedTransformer:
        """``from_pretrained`` with every processing step off: the checkpoint's exact weights,
        so logits equal Hugging Face's (TransformerLens 2.x's function of the same name).

        Example:
            >>> model = HookedTransformer.from_pretrained_no_processing("gpt2")
            >>> torch.allclose(model(tokens), hf_gpt2(tokens).logits, atol=1e-4)
            True
        """
        return cls.from_pretrained(
            model_name,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
            fold_value_biases=fold_value_biases,
            **kwargs,
        )

    @classmethod
    def from_nanogpt(
        cls,
        path: str | Path | dict[str, Any],
        device: torch.device | str | None = None,
        dtype: torch.dtype | str | None = None,
        tokenizer: Any = None,
        model_args: dict[str, Any] | None = None,
    ) -> HookedTransformer:
        """A model from a nanoGPT ``train.py`` checkpoint (or a bare state dict, with
        ``model_args={"n_head": ...}``). See ``interp.loading.nanogpt.load_nanogpt``.

        Example:
            >>> model = HookedTransformer.from_nanogpt("out/ckpt.pt")
        """
        from interp.loading.nanogpt import load_nanogpt

        return load_nanogpt(path, device, dtype, tokenizer=tokenizer, model_args=model_args)

    def process_weights_(
        self,
        fold_ln: bool = True,
        center_writing_weights: bool = True,
        center_unembed: bool = True,
        fold_value_biases: bool = True,
        refactor_factored_attn_matrices: bool = False,
    ) -> HookedTransformer:
        """Rewrite the weights in place without changing the log-probabilities (TransformerLens's
        processing); returns the model. See ``interp.loading.processing``.

        Example:
            >>> model.process_weights_(fold_ln=True, center_unembed=False)
        """
        from interp.loading.processing import process_weights

        return process_weights(
            self,
            fold_ln=fold_ln,
            center_writing_weights=center_writing_weights,
            center_unembed=center_unembed,
            fold_value_biases=fold_value_biases,
            refactor_factored_attn_matrices=refactor_factored_attn_matrices,
        )

    @property
    def QK(self) -> FactoredMatrix:
        """Each head's QK circuit ``W_Q @ W_K^T``, never materialised:
        [n_layers, n_heads, d_model, d_model]."""
        return FactoredMatrix(self.W_Q, self.W_K.transpose(-2, -1))

    @property
    def OV(self) -> FactoredMatrix:
        """Each head's OV circuit ``W_V @ W_O``, never materialised:
        [n_layers, n_heads, d_model, d_model]."""
        return FactoredMatrix(self.W_V, self.W_O)


def lm_cross_entropy_loss(
    logits: Float[Tensor, "batch pos d_vocab"],
    tokens: Int[Tensor, "batch pos"],
    attention_mask: Int[Tensor, "batch pos"] | None = None,
    per_token: bool = False,
) -> Float[Tensor, ""] | Float[Tensor, "batch pos-1"]:
    """Next-token cross-entropy; padding positions are left out of the mean (and zero per token)."""
    if tokens.shape[1] < 2:
        raise ValueError("The loss needs at least two tokens (it predicts each next one).")
    log_probs = logits[:, :-1].float().log_softmax(dim=-1)
    losses = -log_probs.gather(-1, tokens[:, 1:, None])[..., 0]  # [batch, pos - 1]
    if attention_mask is None:
        return losses if per_token else losses.mean()
    counted = (attention_mask[:, 1:] * attention_mask[:, :-1]).to(losses.dtype)
    losses = losses * counted
    return losses if per_token else losses.sum() / counted.sum()
