"""Transcoders: read one hook (``hook_name``, width ``d_in``) and predict another
(``hook_name_out``, width ``d_out``), e.g. an MLP's output from its input.

``Transcoder`` (ReLU), ``SkipTranscoder`` (plus a linear path ``x @ W_skip.T``),
``JumpReLUTranscoder``, ``JumpReLUSkipTranscoder`` (SAELens's), and sparsify's TopK ones,
``TopKTranscoder`` and ``TopKSkipTranscoder``. ``b_dec`` lives at the output, so
``apply_b_dec_to_input`` must be False; ``forward`` returns the prediction (no error term:
that needs the output hook's activation, which ``HookedSAETransformer.add_sae`` has).

Example:
    >>> from interp.sae.saes.transcoder import SkipTranscoder, SkipTranscoderConfig
    >>> tc = SkipTranscoder(SkipTranscoderConfig(d_in=8, d_sae=32, d_out=6,
    ...                                          apply_b_dec_to_input=False))
    >>> out, features = tc.forward_with_activations(torch.randn(3, 8))
    >>> out.shape, features.shape, tc.W_skip.shape
    (torch.Size([3, 6]), torch.Size([3, 32]), torch.Size([6, 8]))
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from interp.sae.config import ArchitectureName, SAEConfig
from interp.sae.sae import SAE
from interp.sae.saes.topk_sae import check_k


@dataclass
class TranscoderConfig(SAEConfig):
    """A transcoder's config: ``d_out`` is the output hook's width (default ``d_in``)."""

    architecture: str = ArchitectureName("transcoder")
    d_out: int | None = None

    def _validate(self) -> None:
        super()._validate()
        if self.d_out is None:
            self.d_out = self.d_in
        if not isinstance(self.d_out, int) or self.d_out <= 0:
            raise ValueError(f"SAE config d_out={self.d_out!r}; it must be a positive int.")
        if self.apply_b_dec_to_input:
            raise ValueError(
                f"apply_b_dec_to_input is not supported for transcoders: "
                f"apply_b_dec_to_input=True with architecture {str(self.architecture)!r}; a "
                "transcoder's b_dec lives at its output hook: set it to False."
            )


@dataclass
class SkipTranscoderConfig(TranscoderConfig):
    architecture: str = ArchitectureName("skip_transcoder")


@dataclass
class JumpReLUTranscoderConfig(TranscoderConfig):
    architecture: str = ArchitectureName("jumprelu_transcoder")


@dataclass
class JumpReLUSkipTranscoderConfig(JumpReLUTranscoderConfig):
    architecture: str = ArchitectureName("jumprelu_skip_transcoder")


@dataclass
class TopKTranscoderConfig(TranscoderConfig):
    """A TopK transcoder's config (sparsify's; not a SAELens class)."""

    architecture: str = ArchitectureName("topk_transcoder")
    k: int = 100
    rescale_acts_by_decoder_norm: bool = False

    def _validate(self) -> None:
        super()._validate()
        check_k(self)


@dataclass
class TopKSkipTranscoderConfig(TopKTranscoderConfig):
    architecture: str = ArchitectureName("topk_skip_transcoder")


class Transcoder(SAE):
    """A ReLU transcoder: ``W_enc [d_in, d_sae]``, ``b_enc``, ``W_dec [d_sae, d_out]``,
    ``b_dec [d_out]``."""

    @property
    def d_out(self) -> int:
        """The output width."""
        return self.cfg.d_out

    def forward_with_activations(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """``(prediction [..., d_out], features [..., d_sae])`` of ``x [..., d_in]``."""
        feature_acts = self.encode(x)
        out = self.decode(feature_acts)
        return (out + self.skip(x) if self.cfg.has_skip else out), feature_acts


class SkipTranscoder(Transcoder):
    """A transcoder plus the linear path ``x @ W_skip.T`` (``W_skip [d_out, d_in]``)."""


class JumpReLUTranscoder(Transcoder):
    """A transcoder whose features are zero below ``threshold [d_sae]``."""


class JumpReLUSkipTranscoder(JumpReLUTranscoder, SkipTranscoder):
    """A JumpReLU transcoder with the skip path (circuit-tracer's Gemma transcoders)."""


class TopKTranscoder(Transcoder):
    """A transcoder keeping the ``k`` largest features (sparsify's)."""


class TopKSkipTranscoder(TopKTranscoder, SkipTranscoder):
    """A TopK transcoder with the skip path (sparsify's)."""
