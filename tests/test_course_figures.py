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


def test_cost_times_one_head_in_4d_where_torch_runs_its_fused_kernel():
    """Are both functions timed on (1, 1, n, d) inputs, the 4-D layout for which PyTorch's CPU
    backend runs its fused (flash) kernel rather than the plain matrix products?"""
    shapes = []

    def recording(Q, K, V):
        shapes.append(tuple(Q.shape))
        return V, Q @ K.transpose(-2, -1)

    measure_attention_cost(recording, LENGTHS, d=4, min_run_time=0.01)
    assert {shape for shape in shapes} == {(1, 1, n, 4) for n in LENGTHS}


def test_cost_figure_draws_what_was_measured():
    """Does the figure of a given measurement plot its times and sizes, nothing re-measured?"""
    from course.plotting import attention_cost_figure

    cost = {"lengths": [8, 16], "yours_s": [0.002, 0.008], "fused_s": [0.001, 0.002],
            "weights_mb": [1.0, 4.0], "inputs_mb": [0.5, 1.0]}
    time_axis, memory_axis = attention_cost_figure(cost).axes
    assert list(time_axis.lines[0].get_ydata()) == [2.0, 8.0]
    assert list(time_axis.lines[1].get_ydata()) == [1.0, 2.0]
    assert list(memory_axis.lines[0].get_ydata()) == [1.0, 4.0]


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
    parts, _ = arch.picture_of(lit)
    assert lit and lit <= set(parts)
    assert section in arch.CAPTIONS


@pytest.mark.parametrize("section", sorted(arch.SECTIONS))
def test_architecture_renders_with_the_section_lit(section):
    """Does the picture draw, with the section's parts in colour and every other part gray?"""
    fig = arch.architecture(section)
    fig.savefig(io.BytesIO(), format="png")
    plt.close(fig)
    fig, ax = plt.subplots()
    lit_parts = set(arch.SECTIONS[section])
    canvas = arch.picture_of(lit_parts)[1](ax)
    canvas.paint(lit_parts)
    gray = matplotlib.colors.to_rgba(arch.GRAY["face"])
    for part, artists in canvas.artists.items():
        faces = [artist.get_facecolor() for artist, kind in artists if kind == "face"]
        lit = part in lit_parts
        assert all((tuple(face) != gray) == lit for face in faces), part
    plt.close(fig)


def test_architecture_draws_every_part_and_rejects_unknown_ones():
    """Is every part of both pictures drawn, and an unknown part an error that lists the real ones?"""
    for parts, draw in (arch.picture_of(set(arch.PARTS)), arch.picture_of(set(arch.DECODER_ONLY_PARTS))):
        fig, ax = plt.subplots()
        assert set(draw(ax).artists) == set(parts)
        plt.close(fig)
    with pytest.raises(ValueError, match="unknown parts.*decoder_cross_attention"):
        arch.architecture(["cross_attention"])
    with pytest.raises(ValueError, match="unknown parts.*decoder_cross_attention"):
        arch.architecture(["gpt_head", "cross_attention"])


def test_decoder_only_picture_shows_what_10_7_builds():
    """Does 10.7 draw the decoder-only models (no encoder, no cross-attention): learned positions
    beside the GPT's embedding, rotary inside the Llama's attention, a final norm and a head tied
    to the embedding in each, the GPT's block (10.5's) gray, the rest lit?"""
    assert arch.picture_of(set(arch.SECTIONS["10.7"]))[0] is arch.DECODER_ONLY_PARTS
    fig = arch.architecture("10.7")
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"learned\npositions", "rotary on q, k", "final LayerNorm", "final RMSNorm", "SwiGLU feed-forward",
            "linear (tied)", "one matrix: tied", "tied here (LLaMA: untied)"} <= texts
    assert not any("cross" in t or "encoder" in t for t in texts)
    plt.close(fig)
    fig, ax = plt.subplots()
    canvas = arch._draw_decoder_only(ax)
    canvas.paint(set(arch.SECTIONS["10.7"]))
    gray = matplotlib.colors.to_rgba(arch.GRAY["face"])
    given = {"gpt_attention": True, "gpt_feed_forward": True, "llama_rotary": False, "gpt_positions": False,
             "llama_head": False, "gpt_tied": False}
    for part, grayed in given.items():
        faces = {tuple(a.get_facecolor()) for a, kind in canvas.artists[part] if kind == "face"}
        lines = {tuple(a.get_facecolor()) for a, kind in canvas.artists[part] if kind == "line"}
        grays = {gray, matplotlib.colors.to_rgba(arch.GRAY["edge"])}
        assert faces | lines and (faces | lines <= grays) == grayed, part
    plt.close(fig)


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


def test_loss_curves_draw_each_run_smoothed_and_the_blind_guess():
    """Does the 10.5 training figure draw one running mean per run, at the steps it ends on, and
    the blind guess as a line at its loss?"""
    from course.figures_block import loss_curves

    ax = loss_curves({"post-norm": [2.0] * 6, "pre-norm": [4.0, 2.0, 0.0, 2.0, 4.0, 6.0]},
                     blind=1.5, smooth=2)
    labels = [line.get_label() for line in ax.lines]
    assert labels == ["post-norm", "pre-norm", "blind guess (ignores the input)"]
    assert list(ax.lines[0].get_xdata()) == [2, 3, 4, 5, 6]  # the first mean covers steps 1 and 2
    assert list(ax.lines[1].get_ydata()) == [3.0, 1.0, 1.0, 3.0, 5.0]
    assert list(ax.lines[2].get_ydata()) == [1.5, 1.5]
    plt.close(ax.figure)


def test_positions_picture_lights_the_encoding_and_the_sum():
    """Does 10.4 light what it builds, the positional encoding and the (+) that adds it, in a
    colour of their own, while the embeddings (built in 10.1) stay gray?"""
    fig, ax = plt.subplots()
    canvas = arch._draw(ax)
    canvas.paint(set(arch.SECTIONS["10.4"]))
    colour, gray = (matplotlib.colors.to_rgba(c) for c in (arch.COLOURS["positions"], arch.GRAY["face"]))
    for side in ("input", "output"):
        faces = [tuple(a.get_facecolor()) for a, kind in canvas.artists[f"{side}_positions"]
                 if kind == "face"]
        assert faces == [colour, colour], side  # the (+) and the encoding's box
        assert all(tuple(a.get_facecolor()) == gray for a, kind in canvas.artists[f"{side}_embedding"]
                   if kind == "face"), side
    plt.close(fig)


# ---------------------------------------------------------------- 10.6's attention maps in words

from course.figures_translation import captured_attention, sharpness, strongest_keys, weight_shares  # noqa: E402


def test_sharpness_of_uniform_and_one_hot_rows():
    """Is a uniform row over n keys 1/n and log n, a one-hot row 1 and 0, and a masked key ignored?"""
    uniform = torch.full((2, 3, 4), 0.25)  # (h, n_q, n_k)
    largest, entropy = sharpness(uniform)
    assert abs(largest - 0.25) < 1e-12 and abs(entropy - torch.log(torch.tensor(4.0)).item()) < 1e-6
    one_hot = torch.eye(4)[None]  # (1, 4, 4)
    assert sharpness(one_hot) == (1.0, 0.0)
    assert abs(sharpness(torch.tensor([[0.7, 0.3], [0.6, 0.4]]))[0] - 0.65) < 1e-6  # the largest of each row
    masked = torch.tensor([[[0.5, 0.5, 0.0]]])  # the third key masked: weight 0
    assert abs(sharpness(masked)[1] - torch.log(torch.tensor(2.0)).item()) < 1e-6


def test_strongest_keys_names_the_key_and_the_heads_that_agree():
    """Does each query's line name its key with the largest mean weight and the heads whose own
    largest weight is there?"""
    weights = torch.tensor([[[0.9, 0.1], [0.2, 0.8]],   # head 0: q0 -> k0, q1 -> k1
                            [[0.6, 0.4], [0.7, 0.3]]])  # head 1: q0 -> k0, q1 -> k0
    first, second = strongest_keys(weights, ["the", "cat"], ["chat", "noir"])
    assert "the -> chat" in first and "0.75" in first and "2 of 2 heads (0, 1)" in first
    assert "cat -> noir" in second and "0.55" in second and "1 of 2 heads (0)" in second


def test_weight_shares_splits_special_keys_self_and_links():
    """Are the shares on <bos>/<eos> and on the word itself measured apart, and the strongest link
    found between two different ordinary words only?"""
    words = ["<bos>", "grande", "souris", "<eos>"]
    head = torch.tensor([[1.0, 0.0, 0.0, 0.0],
                         [0.4, 0.2, 0.4, 0.0],  # grande: 0.4 on <bos>, 0.4 on souris
                         [0.0, 0.2, 0.8, 0.0],  # souris: mostly itself
                         [0.0, 0.0, 0.0, 1.0]])
    (line,) = weight_shares(head[None], words)
    assert line.startswith("head 0: 20% of the weight on <bos>/<eos>, 50% on the word itself")  # words' rows
    assert line.endswith("grande -> souris (0.40)")


def test_captured_attention_reduces_every_call():
    """With reduce, does the hook keep reduce(weights) of every call, detached, and stop afterwards?"""
    class Attention(torch.nn.Module):
        def forward(self, x):
            weights = torch.softmax(x, dim=-1)
            return weights @ x, weights

    attention, x = Attention(), torch.randn(2, 3, 3, requires_grad=True)
    with captured_attention(attention, reduce=sharpness) as peaks:
        attention(x)
        attention(x * 2)
    attention(x)
    assert len(peaks) == 2 and all(isinstance(value, float) for pair in peaks for value in pair)
    assert peaks[1][0] > peaks[0][0]  # larger scores, a more peaked softmax


# ---------------------------------------------------------------- 10.6's overfitting experiment

from course.figures_translation import overfitting_figure, teacher_forced_loss  # noqa: E402


def test_teacher_forced_loss_scores_the_next_words_without_padding():
    """Is it the mean cross-entropy of the shifted targets over the non-padding ones only, with the
    model left in eval() mode (dropout off)?"""
    V, pad = 5, 4
    table = torch.randn(V, V, generator=torch.Generator().manual_seed(0))

    class Bigram(torch.nn.Module):  # logits of the next token from the current one
        def forward(self, src, tgt):
            return table[tgt]  # (B, n, V)

    tgt = torch.tensor([[1, 2, 3, 0], [1, 2, pad, pad]])
    model = Bigram().train()
    loss = teacher_forced_loss(model, None, tgt, pad)
    pairs = [(1, 2), (2, 3), (3, 0), (1, 2)]  # (read, target): the padded targets left out
    want = torch.stack([-torch.log_softmax(table[a], dim=-1)[b] for a, b in pairs]).mean()
    assert abs(loss - want.item()) < 1e-6 and not model.training


def test_overfitting_figure_marks_each_runs_lowest_validation_loss():
    """Does each run get a training line, a validation line and a dot at its lowest validation loss?"""
    curves = {"few": [(10, 2.0, 2.5), (20, 1.0, 2.0), (30, 0.5, 2.2)],
              "many": [(10, 2.0, 2.1), (20, 1.5, 1.6)]}
    fig = overfitting_figure(curves)
    lines = fig.axes[0].get_lines()
    assert len(lines) == 6
    dots = [line for line in lines if line.get_marker() == "o"]
    assert [(list(d.get_xdata()), list(d.get_ydata())) for d in dots] == [([20], [2.0]), ([20], [1.6])]
    plt.close(fig)
