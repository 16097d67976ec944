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
    cost = measure_attention_cost(attention, LENGTHS, d=4, repeats=1)
    assert cost["weights_mb"] == [n * n * 4 / 2**20 for n in LENGTHS]
    assert cost["inputs_mb"] == [3 * n * 4 * 4 / 2**20 for n in LENGTHS]
    assert all(t > 0 for t in cost["yours_s"] + cost["fused_s"])


def test_cost_reflects_what_the_function_returns():
    """A function returning only the diagonal of the weights is reported as linear in n."""
    def diagonal_only(Q, K, V):
        return V, (Q * K).sum(-1)  # weights: (1, n)

    cost = measure_attention_cost(diagonal_only, LENGTHS, d=4, repeats=1)
    assert cost["weights_mb"] == [n * 4 / 2**20 for n in LENGTHS]


def test_cost_figure_has_both_panels_and_the_guide(attention):
    fig = attention_cost(attention, LENGTHS, d=4, repeats=1)
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

    cost = measure_attention_cost(slow_from_32, (8, 16, 32, 64, 128), d=4, repeats=1, max_call_s=0.15)
    assert cost["lengths"] == [8, 16, 32]
    assert len(cost["yours_s"]) == len(cost["fused_s"]) == len(cost["weights_mb"]) == 3
    assert cost["yours_s"][-1] >= 0.3


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
