"""interp.viz.plots: plotly helpers, offline HTML with plotly.js once, optional images."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

from interp.viz.plots import (
    head_score_grid,
    imshow,
    line,
    log_axis,
    logit_lens_plot,
    patching_heatmap,
    plot_label,
    save_html,
    save_image,
    scatter,
)
from tests.support.tolerances import error_bound

# A float32 value written into a figure as a float64 or JSON number: one float32 rounding.
FLOAT32 = error_bound(torch.float32)


def test_imshow_labels_axes_and_centres_a_diverging_scale_on_zero():
    values = torch.tensor([[1.0, -3.0, 0.5], [0.0, 2.0, -1.0]])
    fig = imshow(values, x_labels=["a", "b", "c"], y_labels=["L0", "L1"], title="t")
    heatmap = fig.data[0]
    np.testing.assert_allclose(np.asarray(heatmap.z), values.numpy())
    assert fig.layout.coloraxis.cmid == 0.0 and heatmap.coloraxis == "coloraxis"
    assert list(fig.layout.xaxis.ticktext) == ["a", "b", "c"]
    assert list(fig.layout.yaxis.ticktext) == ["L0", "L1"]
    with pytest.raises(ValueError, match="2 column labels for 3"):
        imshow(values, x_labels=["a", "b"])
    with pytest.raises(ValueError, match="2-D"):
        imshow(torch.ones(2, 2, 2))


def test_repeated_tokens_stay_separate_and_are_escaped():
    tokens = ["<|endoftext|>", " cat", "<b>", " cat"]
    fig = patching_heatmap(torch.randn(2, 4), tokens)
    assert list(fig.layout.xaxis.ticktext) == [
        "&lt;|endoftext|&gt;|0",
        "␣cat|1",
        "&lt;b&gt;|2",
        "␣cat|3",
    ]
    assert list(fig.data[0].x) == [0, 1, 2, 3]
    assert plot_label("a\nb") == "a↵b"


def test_log_axis_ticks_are_numbers_not_bare_digits():
    # plotly's own ticks on a short log range read "5 6 7 8 9 1 2 3"
    assert log_axis([0.3, 4.0]) == {
        "type": "log",
        "tickvals": [0.2, 0.5, 1.0, 2.0, 5.0],
        "ticktext": ["0.2", "0.5", "1", "2", "5"],
    }
    assert log_axis([1e-3, 100])["ticktext"] == ["0.001", "0.01", "0.1", "1", "10", "100"]
    assert log_axis([0.0, -1.0]) == {"type": "log"}


def test_line_scatter_and_grids_hold_their_data():
    values = torch.randn(3, 5)
    fig = line(values, line_labels=["x", "y", "z"])
    assert len(fig.data) == 3
    np.testing.assert_allclose(fig.data[1].y, values[1].numpy(), rtol=FLOAT32)
    x, y = torch.randn(6), torch.randn(6)
    fig = scatter(x, y, point_labels=[f"L0H{i}" for i in range(6)])
    np.testing.assert_allclose(fig.data[0].x, x.numpy(), rtol=FLOAT32)
    with pytest.raises(ValueError, match="differ in size"):
        scatter(x, y[:3])
    scores = {"previous token": torch.rand(2, 3), "induction": torch.rand(2, 3)}
    fig = head_score_grid(scores)
    assert len(fig.data) == 2
    np.testing.assert_allclose(fig.data[1].z, scores["induction"].numpy(), rtol=FLOAT32)
    with pytest.raises(ValueError, match="not"):
        head_score_grid({"a": torch.rand(2, 3), "b": torch.rand(3, 3)})


def test_logit_lens_plot_writes_predictions_in_cells():
    probs = torch.tensor([[0.1, 0.9], [0.5, 0.2]])
    fig = logit_lens_plot(probs, [["<a>", "b"], ["c", "d"]], ["embed", "L0"], ["x", "y"])
    assert fig.data[0].text[0][0] == "&lt;a&gt;"
    assert (fig.layout.coloraxis.cmin, fig.layout.coloraxis.cmax) == (0.0, 1.0)


def test_save_html_inlines_plotly_once_for_many_figures(tmp_path):
    figures = [imshow(torch.randn(2, 2)), line(torch.randn(4)), scatter([1, 2], [3, 4])]
    page = save_html(figures, tmp_path / "figs.html", title="<t>").read_text()
    assert page.count("Plotly.newPlot") == 3
    assert page.count("plotly.js v") == 1  # the library's banner comment
    assert "<script src" not in page and "<h1>&lt;t&gt;</h1>" in page


@pytest.mark.skipif(importlib.util.find_spec("kaleido") is not None, reason="kaleido installed")
def test_save_image_without_kaleido_says_how_to_fix(tmp_path):
    with pytest.raises(RuntimeError, match="pip install kaleido"):
        save_image(imshow(torch.randn(2, 2)), tmp_path / "fig.png")


def test_imshow_of_head_scores_draws_one_panel_per_score_on_one_scale():
    from interp import load_model
    from interp.analysis import head_scores

    model = load_model("attn-only-2l")
    scores = head_scores(model, torch.randint(0, 100, (1, 10)).repeat(1, 2))
    fig = imshow(scores, x_title="head", y_title="layer")
    assert [annotation.text for annotation in fig.layout.annotations] == list(scores)
    assert len(fig.data) == 3 and {trace.coloraxis for trace in fig.data} == {"coloraxis"}
    for trace, values in zip(fig.data, scores.values(), strict=True):
        np.testing.assert_allclose(np.asarray(trace.z, dtype=float), values.numpy(), rtol=FLOAT32)
    assert len(fig.layout.xaxis3.ticktext) == model.cfg.n_heads
    assert fig.layout.yaxis.title.text == "layer" and fig.layout.xaxis.title.text == "head"


def test_imshow_of_a_dict_it_cannot_draw_names_the_keys_to_pass():
    with pytest.raises(
        ValueError, match=r"got \{'a': \(2, 3\), 'b': \(3, 3\)\}.*imshow\(values\['a'\]\)"
    ):
        imshow({"a": torch.rand(2, 3), "b": torch.rand(3, 3)})
    with pytest.raises(TypeError, match=r"'labels' entry is a list.*keys \['s', 'labels'\]"):
        imshow({"s": torch.rand(2, 3), "labels": ["L0H0"]})
    with pytest.raises(ValueError, match="empty dict"):
        imshow({})
    with pytest.raises(TypeError, match=r"tuple of \(dict, list\).*imshow\(scores\)"):
        imshow(({"s": torch.rand(2, 3)}, [["L0H0"]]))
