"""Text generation: ``generate`` continues text or tokens one sampled token at a time,
stepping a key/value cache so each step runs only the new token through the blocks.

``GenerationMixin`` gives ``HookedTransformer`` TransformerLens's ``generate``; the class
using it has ``cfg``, ``tokenizer``, ``device``, ``ln_final``, ``unembed`` and the
tokenization methods, and its forward takes ``past_kv_cache`` and ``stop_at_layer``.

Example:
    >>> shakespeare = interp.load_model("shakespeare-char")
    >>> text = shakespeare.generate("ROMEO:", max_new_tokens=50, temperature=0.8, seed=0)
    >>> text.startswith("ROMEO:"), len(text)
    (True, 56)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
import torch.nn.functional as F
from jaxtyping import Int
from torch import Tensor
from tqdm.auto import tqdm

from interp.cache.kv_cache import KeyValueCache
from interp.model.sampling import sample_next_token
from interp.utils.device_map import module_device


class GenerationMixin:
    """TransformerLens's ``generate``, for ``HookedTransformer``."""

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
            >>> shakespeare = interp.load_model("shakespeare-char")
            >>> shakespeare.generate("ROMEO:", max_new_tokens=20, do_sample=False)   # greedy
            'ROMEO:\\nWhat thou shalt the'
            >>> shakespeare.generate(["ROMEO:", "JULIET: O"], max_new_tokens=5, do_sample=False)
            ['ROMEO:\\nWhat', 'JULIET: O man ']
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
        # Laid over devices, the logits come from the unembedding's device.
        logits_device = module_device(self.unembed, self.device)
        generator = torch.Generator(logits_device).manual_seed(seed) if seed is not None else None
        eos = getattr(self.tokenizer, "eos_token_id", None)
        finished = torch.zeros(tokens.shape[0], dtype=torch.bool, device=self.device)
        kv_cache = KeyValueCache.empty(self.cfg.n_layers) if use_past_kv_cache else None
        step_input, all_mask = tokens, mask
        last_block = self.cfg.n_layers
        for _ in tqdm(range(max_new_tokens), disable=not verbose):
            if kv_cache is not None and self.recomputes_cache(tokens.shape[1], kv_cache.length):
                kv_cache = KeyValueCache.empty(self.cfg.n_layers)
                step_input, mask = tokens, all_mask
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
            last = residual[:, -1:].to(module_device(self.ln_final, residual.device))
            last = self.ln_final(last)
            logits = self.unembed(last.to(module_device(self.unembed, last.device)))[:, -1]
            next_token = sample_next_token(logits, do_sample, temperature, top_k, top_p, generator)
            next_token = next_token.to(tokens.device)
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

    def recomputes_cache(self, n_tokens: int, cached: int) -> bool:
        """Whether generation drops its key/value cache before the next step, as Hugging
        Face's Phi 3 does: with LongRoPE, the first time the ``n_tokens`` pass the original
        context while the ``cached`` positions do not, every key is rotated again with the
        long factors."""
        original = self.cfg.longrope_original_ctx_len
        return original is not None and n_tokens > original and cached <= original
