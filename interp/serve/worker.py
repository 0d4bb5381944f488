"""The models a server holds: one worker a model (its lock, its prompt limit), and one shared
LRU cache of forward passes, so every request about a prompt reuses one ``run_with_cache``.

Requests run in a thread pool (``ModelWorker.call``), never on the event loop, so a slow one
does not stall the others. Hooks are thread-local, but a model's forward passes still take
its lock, one at a time; reading a cached entry needs no lock.
"""

from __future__ import annotations

import difflib
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import torch
from jaxtyping import Float, Int
from torch import Tensor

from interp.cache import ActivationCache
from interp.model import HookedTransformer
from interp.serve.errors import ApiError
from interp.serve.examples import example_prompts

T = TypeVar("T")
MAX_TOKENS = 256  # the longest prompt served (BOS included), unless the model's n_ctx is less
CACHE_ENTRIES = 32
CACHE_BYTES = 512 * 2**20


@dataclass
class ForwardEntry:
    """One prompt's forward pass: its tokens, last-position logits and full activation cache.

    ``derived`` memoises what is computed from the cache (logit lens, head scores...), keyed
    by the name of the analysis; entries are never mutated otherwise."""

    tokens: Int[Tensor, "1 pos"]
    str_tokens: list[str]
    last_logits: Float[Tensor, " d_vocab"]
    cache: ActivationCache
    n_bytes: int
    derived: dict[str, Any] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)


class ForwardCache:
    """A thread-safe LRU of ``ForwardEntry`` by (model, prompt), bounded in entries and bytes.

    Example:
        >>> cache = ForwardCache(max_entries=8)
        >>> cache.get(("attn-only-2l", "1 2 3")) is None
        True
    """

    def __init__(self, max_entries: int = CACHE_ENTRIES, max_bytes: int = CACHE_BYTES) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._entries: OrderedDict[tuple[str, str], ForwardEntry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple[str, str]) -> ForwardEntry | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self.hits += 1
            self._entries.move_to_end(key)
            return entry

    def put(self, key: tuple[str, str], entry: ForwardEntry) -> None:
        with self._lock:
            self._entries[key] = entry
            self._entries.move_to_end(key)
            while len(self._entries) > 1 and (
                len(self._entries) > self.max_entries or self.n_bytes > self.max_bytes
            ):
                self._entries.popitem(last=False)

    @property
    def n_bytes(self) -> int:
        return sum(entry.n_bytes for entry in self._entries.values())

    def __len__(self) -> int:
        return len(self._entries)


class ModelWorker:
    """One served model: tokenizes within the limits and runs its forward passes under a lock.

    Example:
        >>> worker = ModelWorker("attn-only-2l", interp.load_model("attn-only-2l"), ForwardCache())
        >>> worker.forward("1 2 3 1 2").str_tokens
        ['<|bos|>', '1', '2', '3', '1', '2']
    """

    def __init__(
        self,
        name: str,
        model: HookedTransformer,
        cache: ForwardCache,
        max_tokens: int = MAX_TOKENS,
        sae: Any = None,
    ) -> None:
        self.name, self.model, self.cache, self.sae = name, model.eval(), cache, sae
        self.max_tokens = min(max_tokens, model.cfg.n_ctx)
        self.lock = threading.Lock()
        self.forwards = 0  # forward passes run (the rest were served from the cache)
        self._bos_id = getattr(model.tokenizer, "bos_token_id", None)
        self.example_prompt, self.example_corrupted = example_prompts(model, self.max_tokens)

    def tokenize(self, prompt: str, what: str = "prompt") -> Int[Tensor, "1 pos"]:
        """The prompt's tokens [1, pos], or a 422 naming the bad characters or the length."""
        try:
            tokens = self.model.to_tokens(prompt, truncate=False)
        except ValueError as error:  # characters outside a character model's alphabet, ...
            raise ApiError(
                422, f"The {what} cannot be tokenized by {self.name}: {error}"
            ) from error
        n_bos = int(bool(self.model.cfg.default_prepend_bos) and self._bos_id is not None)
        if tokens.shape[1] <= n_bos:
            example = " ".join(self.example_prompt.split(" ")[:3])
            raise ApiError(
                422,
                f"The {what} {prompt!r} has no tokens for {self.name} (only whitespace?); "
                "type some text" + (f", e.g. {example!r}." if example else "."),
            )
        if tokens.shape[1] > self.max_tokens:
            raise ApiError(
                422,
                f"The {what} is {tokens.shape[1]} tokens; this server takes at most "
                f"{self.max_tokens} for {self.name} (n_ctx {self.model.cfg.n_ctx}): shorten it.",
            )
        return tokens

    def forward(self, prompt: str) -> ForwardEntry:
        """The cached forward pass of ``prompt`` (computed once, then shared)."""
        key = (self.name, prompt)
        entry = self.cache.get(key)
        if entry is not None:
            return entry
        tokens = self.tokenize(prompt)
        with self.lock, torch.no_grad():
            entry = self.cache.get(key)  # another request may have run it while we waited
            if entry is not None:
                return entry
            logits, cache = self.model.run_with_cache(tokens)
            self.forwards += 1
        n_bytes = sum(t.numel() * t.element_size() for t in cache.values())
        entry = ForwardEntry(
            tokens=tokens,
            str_tokens=self.model.to_str_tokens(tokens),
            last_logits=logits[0, -1].float().cpu(),
            cache=cache,
            n_bytes=n_bytes,
        )
        self.cache.put(key, entry)
        return entry

    def derived(self, entry: ForwardEntry, name: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per entry, under the entry's lock. It reads the cache and the
        weights (no forward pass, no hooks), so it needs not wait for the model's lock."""
        if name in entry.derived:
            return entry.derived[name]
        with entry.lock, torch.no_grad():
            if name not in entry.derived:
                entry.derived[name] = compute()
        return entry.derived[name]

    def single_token(self, text: str, what: str) -> int:
        """The id of ``text`` if it is one token; else a 422 showing its pieces."""
        try:
            pieces = self.model.to_str_tokens(text, prepend_bos=False) if text else []
        except ValueError as error:  # outside the vocabulary, or whitespace a tokenizer drops
            raise ApiError(
                422, f"The {what} {text!r} cannot be tokenized by {self.name}: {error}"
            ) from error
        if len(pieces) != 1:
            raise ApiError(
                422,
                f"The {what} {text!r} is {len(pieces)} tokens for {self.name} ({pieces}); "
                f"give exactly one token" + (f", e.g. {pieces[0]!r}." if pieces else "."),
            )
        return self.model.to_single_token(text)

    def check_layer_head(self, layer: int, head: int | None) -> None:
        cfg = self.model.cfg
        if not 0 <= layer < cfg.n_layers:
            raise ApiError(
                422,
                f"layer {layer} is out of range: {self.name} has {cfg.n_layers} layers "
                f"(0 to {cfg.n_layers - 1}).",
            )
        if head is not None and not 0 <= head < cfg.n_heads:
            raise ApiError(
                422,
                f"head {head} is out of range: {self.name} has {cfg.n_heads} heads per layer "
                f"(0 to {cfg.n_heads - 1}).",
            )


class Workers:
    """The models named at start-up, by name; nothing else can be asked for.

    Example:
        >>> workers = Workers({"attn-only-2l": interp.load_model("attn-only-2l")})
        >>> workers["attn-only-2l"].model.cfg.n_layers
        2
    """

    def __init__(
        self,
        models: dict[str, HookedTransformer],
        saes: dict[str, Any] | None = None,
        max_tokens: int = MAX_TOKENS,
        cache: ForwardCache | None = None,
    ) -> None:
        if not models:
            raise ValueError("Serve at least one model, e.g. {'attn-only-2l': model}.")
        self.cache = cache or ForwardCache()
        saes = saes or {}
        self._workers = {
            name: ModelWorker(name, model, self.cache, max_tokens, saes.get(name))
            for name, model in models.items()
        }

    def __getitem__(self, name: str) -> ModelWorker:
        worker = self._workers.get(name)
        if worker is None:
            close = difflib.get_close_matches(name, list(self._workers), n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ApiError(
                404,
                f"unknown model {name!r}: {hint}this server serves {', '.join(self._workers)} "
                "(start it with --model NAME for another).",
            )
        return worker

    def __iter__(self):
        return iter(self._workers.values())
