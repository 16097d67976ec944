"""Does 10.8's cache for the GPT (course/decoding.py, KVCachedGPT) give the GPT's own next-token
logits, one position per step, and start afresh on any other input?"""

from __future__ import annotations

import pytest
import torch

from course.decoding import KVCachedGPT, positions_per_call
from samples import load_solution_namespace


@pytest.fixture(scope="module")
def gpt():
    ns = load_solution_namespace("10.8-decoding")
    torch.manual_seed(0)
    return ns["GPT"](11, d_model=12, num_heads=3, d_ff=20, num_layers=2, max_len=6).double().eval()


def test_cached_logits_are_the_gpts(gpt):
    """After the prompt, is every call one new position whose logits are the GPT's last ones?"""
    cached = KVCachedGPT(gpt)
    prompt = torch.tensor([[1, 4, 5], [1, 7, 2]])  # (B, n0)
    steps = [torch.cat([prompt, torch.tensor([[3, 9, 6], [8, 8, 5]])[:, :m]], dim=1) for m in range(4)]
    with torch.no_grad():
        want = [gpt(ids) for ids in steps]
        with positions_per_call(gpt.blocks[0].self_attn.w_k) as calls:
            got = [cached(ids) for ids in steps]
    assert calls == [6, 2, 2, 2]  # B * n0, then B per step
    assert torch.allclose(got[0], want[0])  # the prompt: every position
    for out, full in zip(got[1:], want[1:]):
        assert out.shape == (2, 1, 11)
        assert torch.allclose(out[:, -1], full[:, -1])


def test_other_inputs_start_afresh(gpt):
    """Does a new prompt, or a window that slid past max_len, recompute from nothing (right logits)?"""
    cached = KVCachedGPT(gpt)
    with torch.no_grad():
        cached(torch.tensor([[1, 4, 5, 6, 7, 8]]))
        slid = torch.tensor([[4, 5, 6, 7, 8, 9]])  # the last max_len tokens after one more
        assert torch.allclose(cached(slid), gpt(slid))
        other = torch.tensor([[1, 2], [1, 3]])
        assert torch.allclose(cached(other), gpt(other))


def test_decoders_are_timed_at_every_length():
    """Does time_decoders time each decoder at each length on the batch, and the figure show them?"""
    import matplotlib

    matplotlib.use("Agg")
    from course.decoding import decoding_times, time_decoders

    ns = load_solution_namespace("10.8-decoding")
    torch.manual_seed(0)
    model = ns["Transformer"](9, 8, d_model=8, num_heads=2, d_ff=16).eval()
    src = torch.randint(4, 9, (3, 5))  # (3, 5)
    decoders = {"greedy_decode": ns["greedy_decode"], "greedy_decode_cached": ns["greedy_decode_cached"]}
    times = time_decoders(decoders, model, src, (2, 4), min_run_time=1e-3)
    assert times["lengths"] == [2, 4] and times["batch"] == 3 and times["threads"] == 1
    assert all(len(s) == 2 and min(s) > 0 for s in times["seconds"].values())
    fig = decoding_times(times)
    assert len(fig.axes) == 2
