"""A tiny attention-only model with a hand-planted induction circuit, for analysis tests.

The residual stream is split into one-hot subspaces:

    TOK  (d_vocab dims)  the current token, written by the embedding
    POS  (n_ctx dims)    the position, written by the positional embedding
    PREV (d_vocab dims)  the previous token, written by the previous-token head L0H2
    OUT  (d_vocab dims)  the predicted next token, written by the induction head L1H1, read by W_U

Heads (the others keep random init weights and attend almost uniformly):

    L0H0  duplicate-token head: query TOK matches key TOK; its own position is penalised.
    L0H2  previous-token head: query POS p matches key POS p-1; copies TOK into PREV.
    L1H1  induction head: query TOK matches key PREV (the key's previous token is the current
          token); copies the key's TOK into OUT, so the unembedding predicts it.
"""

from __future__ import annotations

import math

import torch

from interp import HookedTransformer, HookedTransformerConfig

D_VOCAB, N_CTX, D_HEAD = 30, 24, 64
DUPLICATE_HEAD, PREVIOUS_HEAD, INDUCTION_HEAD = (0, 0), (0, 2), (1, 1)
TOK, POS = 0, D_VOCAB  # subspace offsets
PREV, OUT = D_VOCAB + N_CTX, 2 * D_VOCAB + N_CTX
D_MODEL = 3 * D_VOCAB + N_CTX
SCORE = 15.0 * math.sqrt(D_HEAD)  # attention score of a match, before the 1/sqrt(d_head)


def tiny_attn_only_config(seed: int = 0) -> HookedTransformerConfig:
    return HookedTransformerConfig(
        n_layers=2,
        d_model=D_MODEL,
        n_heads=3,
        d_head=D_HEAD,
        d_vocab=D_VOCAB,
        n_ctx=N_CTX,
        attn_only=True,
        normalization_type=None,
        seed=seed,
    )


def random_attn_only_model(seed: int = 1) -> HookedTransformer:
    """The same architecture with GPT-2's random initialisation."""
    return HookedTransformer(tiny_attn_only_config(seed)).eval()


@torch.no_grad()
def planted_induction_model() -> HookedTransformer:
    model = random_attn_only_model(seed=0)
    eye_vocab, eye_ctx = torch.eye(D_VOCAB), torch.eye(N_CTX)
    model.embed.W_E.zero_()[:, TOK : TOK + D_VOCAB] = eye_vocab
    model.pos_embed.W_pos.zero_()[:, POS : POS + N_CTX] = eye_ctx
    model.unembed.W_U.zero_()[OUT : OUT + D_VOCAB] = 10 * eye_vocab

    duplicate = model.blocks[0].attn
    head = DUPLICATE_HEAD[1]
    duplicate.W_Q[head].zero_()[TOK : TOK + D_VOCAB, :D_VOCAB] = SCORE * eye_vocab
    duplicate.W_K[head].zero_()[TOK : TOK + D_VOCAB, :D_VOCAB] = eye_vocab
    # Query position p gets -SCORE against key position p: a token is not its own duplicate.
    duplicate.W_Q[head][POS : POS + N_CTX, D_VOCAB : D_VOCAB + N_CTX] = -SCORE * eye_ctx
    duplicate.W_K[head][POS : POS + N_CTX, D_VOCAB : D_VOCAB + N_CTX] = eye_ctx

    previous = model.blocks[0].attn
    head = PREVIOUS_HEAD[1]
    previous.W_Q[head].zero_()[POS : POS + N_CTX, :N_CTX] = SCORE * eye_ctx
    # Key position j lands on query position j + 1.
    previous.W_K[head].zero_()[POS : POS + N_CTX, :N_CTX] = eye_ctx.roll(1, dims=1)
    previous.W_K[head][POS + N_CTX - 1] = 0  # the last position has no successor
    previous.W_V[head].zero_()[TOK : TOK + D_VOCAB, :D_VOCAB] = eye_vocab
    previous.W_O[head].zero_()[:D_VOCAB, PREV : PREV + D_VOCAB] = eye_vocab

    induction = model.blocks[1].attn
    head = INDUCTION_HEAD[1]
    induction.W_Q[head].zero_()[TOK : TOK + D_VOCAB, :D_VOCAB] = SCORE * eye_vocab
    induction.W_K[head].zero_()[PREV : PREV + D_VOCAB, :D_VOCAB] = eye_vocab
    induction.W_V[head].zero_()[TOK : TOK + D_VOCAB, :D_VOCAB] = eye_vocab
    induction.W_O[head].zero_()[:D_VOCAB, OUT : OUT + D_VOCAB] = eye_vocab
    return model
