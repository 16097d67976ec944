"""Does the 10.2 cost figure measure what it says (the weights returned, both implementations)?"""

import time

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from course.plotting import attention_cost, measure_attention_cost  # noqa: E402

LENGTHS = (8, 16, 32)


ASSIGNMENT = "10.2-scaled-dot-product-attention"


@pytest.fixture(scope="module")
def attention(solution):
    return solution["scaled_dot_product_attention"]


def test_cost_reports_the_returned_weights_and_inputs(attention):
    cost = measure_attention_cost(attention, LENGTHS, d=4, min_run_time=0.01)
    assert cost["weights_mb"] == [n * n * 4 / 2**20 for n in LENGTHS]
    assert cost["inputs_mb"] == [3 * n * 4 * 4 / 2**20 for n in LENGTHS]
    assert all(t > 0 for t in cost["yours_s"] + cost["fused_s"])


def test_cost_reflects_what_the_function_returns():
    """A function returning only the diagonal of the weights is reported as linear in n."""
    def diagonal_only(Q, K, V):
        return V, (Q * K).sum(-1)  # weights: (1, n)

    cost = measure_attention_cost(diagonal_only, LENGTHS, d=4, min_run_time=0.01)
    assert cost["weights_mb"] == [n * 4 / 2**20 for n in LENGTHS]


def test_cost_figure_has_both_panels_and_the_guide(attention):
    fig = attention_cost(attention, LENGTHS, d=4, min_run_time=0.01)
    time_axis, memory_axis = fig.axes
    assert [line.get_label() for line in time_axis.lines] == [
        "yours", "F.scaled_dot_product_attention", "∝ n²"]
    assert [line.get_label() for line in memory_axis.lines] == ["weights (n × n)", "Q, K, V (3 × n × d)"]
    assert list(memory_axis.lines[0].get_ydata()) == [n * n * 4 / 2**20 for n in LENGTHS]


def test_cost_stops_growing_when_a_call_gets_slow(attention):
    """A slow (loop-like) attention is not run at every length: measuring stops after the slow one."""
    def slow_from_32(Q, K, V):
        if Q.shape[-2] >= 32:
            time.sleep(0.3)
        return attention(Q, K, V)

    cost = measure_attention_cost(slow_from_32, (8, 16, 32, 64, 128), d=4, min_run_time=0.01, max_call_s=0.15)
    assert cost["lengths"] == [8, 16, 32]
    assert len(cost["yours_s"]) == len(cost["fused_s"]) == len(cost["weights_mb"]) == 3
    assert cost["yours_s"][-1] >= 0.3


# ---------------------------------------------------------------- the architecture picture

import io  # noqa: E402

import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from course import architecture as arch  # noqa: E402
from course.figures_block import encoding_curves  # noqa: E402
from course.plotting import attention_maps_per_head, heatmap, seconds_per_call  # noqa: E402


@pytest.mark.parametrize("section", sorted(arch.SECTIONS))
def test_each_section_lights_parts_that_exist(section):
    """Does every section's highlight name only parts of the picture, and some of them?"""
    lit = set(arch.SECTIONS[section])
    assert lit and lit <= set(arch.PARTS)
    assert section in arch.CAPTIONS


@pytest.mark.parametrize("section", sorted(arch.SECTIONS))
def test_architecture_renders_with_the_section_lit(section):
    """Does the picture draw, with the section's parts in colour and every other part gray?"""
    fig = arch.architecture(section)
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)
    fig, ax = plt.subplots()
    canvas = arch._draw(ax)
    canvas.paint(set(arch.SECTIONS[section]))
    gray = matplotlib.colors.to_rgba(arch.GRAY["face"])
    for part, artists in canvas.artists.items():
        faces = [artist.get_facecolor() for artist, kind in artists if kind == "face"]
        lit = part in arch.SECTIONS[section]
        assert all((tuple(face) != gray) == lit for face in faces), part
    plt.close(fig)


def test_architecture_draws_every_part_and_rejects_unknown_ones():
    """Is every part of PARTS drawn, and an unknown part an error that lists the real ones?"""
    fig, ax = plt.subplots()
    assert set(arch._draw(ax).artists) == set(arch.PARTS)
    plt.close(fig)
    with pytest.raises(ValueError, match="unknown parts.*decoder_cross_attention"):
        arch.architecture(["cross_attention"])


def test_attention_head_shapes_renders():
    """Does the matrix-product view of one head draw its five matrices with their shapes?"""
    fig = arch.attention_head_shapes(n_q=3, n_k=5, d_k=4, d_v=6)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "(3 × 4)\nn_q × d_k" in texts and "(3 × 6)\nn_q × d_v" in texts
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)


# ---------------------------------------------------------------- figures a person can read


def test_annotations_contrast_with_their_cells():
    """Are numbers black on light (yellow) cells and white on dark ones?"""
    ax = heatmap(torch.tensor([[0.0, 1.0]]), vmin=0, vmax=1)
    colours = [t.get_color() for t in ax.texts]
    assert colours == ["white", "black"]
    plt.close(ax.figure)


def test_per_head_panels_do_not_overlap():
    """Do the tick labels and titles of neighbouring head panels stay apart?"""
    tokens = ["nous", "mangeons", "du", "pain"]
    fig = attention_maps_per_head(torch.full((4, 4, 4), 0.25), tokens, tokens)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes[:4]:
        labels = [t for t in ax.get_yticklabels() + ax.get_xticklabels() if t.get_visible() and t.get_text()]
        boxes.append([t.get_window_extent(renderer) for t in labels] + [ax.get_window_extent(renderer)])
    for left, right in zip(boxes, boxes[1:]):
        assert not any(a.overlaps(b) for a in left for b in right[:-1])
    plt.close(fig)


def test_encoding_curves_are_sampled_finely():
    """Are the curves drawn at many points per position, with the table's values as dots on them?"""
    pe = torch.stack([torch.sin(torch.arange(20.0)), torch.cos(torch.arange(20.0))], dim=1)  # d_model=2
    ax = encoding_curves(pe, dims=[0, 1])
    curve, dots = ax.lines[0], ax.lines[1]
    assert len(curve.get_xdata()) >= 10 * len(dots.get_xdata())
    assert max(abs(a - b) for a, b in zip(dots.get_ydata(), pe[:, 0].tolist())) < 1e-6
    plt.close(ax.figure)


def test_timing_uses_torch_benchmark(monkeypatch):
    """Is attention timed by torch.utils.benchmark (blocked_autorange), not a hand-made loop?"""
    from torch.utils import benchmark  # plotting imports it only when it measures

    calls = []
    original = benchmark.Timer.blocked_autorange

    def spy(self, *args, **kwargs):
        calls.append(kwargs.get("min_run_time"))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(benchmark.Timer, "blocked_autorange", spy)
    assert seconds_per_call(torch.matmul, torch.ones(4, 4), torch.ones(4, 4), min_run_time=0.01) > 0
    assert calls == [0.01]


def test_accuracy_by_position_draws_every_model_and_the_guides():
    """Does the 10.4 length figure draw one smoothed curve per model, the training length
    and the guessing line, at the right positions?"""
    from course.figures_block import accuracy_by_position

    ax = accuracy_by_position({"a": [1.0] * 10, "b": [0.0, 1.0] * 5}, start=3, train_len=6,
                              chance=0.1, smooth=2)
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["a", "b", "longest training sequence (6)", "guessing"]
    assert list(ax.lines[0].get_xdata()) == list(range(4, 13))  # positions 3 .. 12, first mean at 4
    assert list(ax.lines[1].get_ydata()) == [0.5] * 9
