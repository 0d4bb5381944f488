"""Component labels in TransformerLens's conventions: "L3H7" (head), "L3N42" (neuron); and
tokens as labels, their whitespace made visible ("␣cat")."""

from __future__ import annotations


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    """Head labels in layer-major order, matching a ``[n_layers * n_heads, ...]`` stack.

    Example:
        >>> head_labels(2, 2)
        ['L0H0', 'L0H1', 'L1H0', 'L1H1']
    """
    return [f"L{layer}H{head}" for layer in range(n_layers) for head in range(n_heads)]


def head_label_grid(n_layers: int, n_heads: int) -> list[list[str]]:
    """Head labels shaped like a ``[n_layers, n_heads]`` score matrix: ``grid[l][h]`` is
    ``f"L{l}H{h}"``.

    Example:
        >>> head_label_grid(2, 2)
        [['L0H0', 'L0H1'], ['L1H0', 'L1H1']]
    """
    return [[f"L{layer}H{head}" for head in range(n_heads)] for layer in range(n_layers)]


def neuron_labels(layers: range | list[int], neurons: list[int]) -> list[str]:
    """Neuron labels in layer-major order, matching a ``[n_layers * n_neurons, ...]`` stack.

    Example:
        >>> neuron_labels(range(2), [0, 5])
        ['L0N0', 'L0N5', 'L1N0', 'L1N5']
    """
    return [f"L{layer}N{neuron}" for layer in layers for neuron in neurons]


# How a token's whitespace is drawn where the token is a label (an axis, a box, a table cell):
# a blank space or line break would be an empty label. The same marks as the dashboard's
# visible() in interp/serve/static/app.js.
WHITESPACE_MARKS = {" ": "␣", "\n": "↵", "\t": "⇥"}
_MARKS = str.maketrans(WHITESPACE_MARKS)


def token_label(token: str) -> str:
    """A token as a label: a space as ``␣``, a newline as ``↵``, a tab as ``⇥`` (escape the
    result for HTML after).

    Example:
        >>> token_label(" cat"), token_label("\\n"), token_label(" ")
        ('␣cat', '↵', '␣')
    """
    return str(token).translate(_MARKS)
