"""greedy_decode: right answers written differently, and planted bugs (built on the notebook's
padding_mask)."""

import torch
import torch.nn.functional as F

from course.visible.s10_6.greedy_decode import AFTER_EOS, GLOBAL_PAD
from tests.answers import ON_A_FIXED_DEVICE, bug, right
from tests.answers.s10_6 import given

EXERCISE = "greedy_decode"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = ("a decoding loop on a stand-in model: the reference is the contract's ids, checked step by "
                "step")
BOS_ = 1
padding_mask = None  # the notebook's, set by answers()
PAD = 0  # the notebook's global padding id (its Vocab's <pad>)


@torch.no_grad()
def greedy_one_by_one(model, src, bos_id, eos_id, max_len):
    """A right answer: one sentence at a time with model(src, ys); rows padded with eos_id."""
    rows = []
    for b in range(src.shape[0]):
        ys = torch.tensor([[bos_id]], device=src.device)
        for _ in range(max_len - 1):
            word = model(src[b:b + 1], ys)[0, -1].argmax()
            ys = torch.cat([ys, word.view(1, 1)], dim=1)
            if word.item() == eos_id:
                break
        rows.append(ys[0])
    n = max(len(r) for r in rows)
    return torch.stack([F.pad(r, (0, n - len(r)), value=eos_id) for r in rows])


@torch.no_grad()
def greedy_pad_after_eos(model, src, bos_id, eos_id, max_len):
    """A for loop with break; finished rows continue with pad_id, not eos_id (the one rule after
    <eos>, shared with 10.8's cached decoder)."""
    mask = padding_mask(src, model.pad_id)
    memory = model.encode(src, mask)
    ys = src.new_full((src.shape[0], 1), bos_id)
    done = torch.zeros_like(ys[:, 0], dtype=torch.bool)
    for _ in range(max_len - 1):
        word = model.decode(ys, memory, mask)[:, -1, :].argmax(-1)
        word[done] = model.pad_id
        ys = torch.cat([ys, word.unsqueeze(1)], 1)
        done = done | (word == eos_id)
        if bool(done.all()):
            break
    return ys


def make_greedy(*, stop="all", length="total", feed="output", position=-1, bos="arg",
                dtype=torch.long, pad="model", placed=True):
    """greedy_decode with one learner-like mistake switched on."""

    @torch.no_grad()
    def greedy(model, src, bos_id, eos_id, max_len):
        mask = padding_mask(src, model.pad_id if pad == "model" else PAD)
        memory = model.encode(src, mask)
        start = bos_id if bos == "arg" else BOS_
        ys = torch.full((src.shape[0], 1), start, device=src.device if placed else None).to(dtype)
        done = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)
        steps = max_len - 1 if length == "total" else max_len
        for _ in range(steps):
            inputs = ys if feed == "output" else ys[:, :1]
            word = model.decode(inputs.long(), memory, mask)[:, position].argmax(-1)
            word = word.masked_fill(done, eos_id)  # the one rule after <eos>: mistakes lie elsewhere
            ys = torch.cat([ys, word[:, None].to(dtype)], dim=1)
            done |= word == eos_id
            if stop == "all" and done.all() or stop == "first" and done.any():
                break
        return ys[:, 1:] if bos == "drop" else ys

    return greedy


@torch.no_grad()
def greedy_argmax_batch(model, src, bos_id, eos_id, max_len):
    """The argmax over the batch axis instead of the vocabulary."""
    mask = (src != model.pad_id)[:, None, None, :]
    memory = model.encode(src, mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)
    while ys.shape[1] < max_len:
        word = model.decode(ys, memory, mask)[:, -1].argmax(0).expand(src.shape[0])
        ys = torch.cat([ys, word[:, None]], dim=1)
        if (ys == eos_id).any(1).all():
            break
    return ys


@torch.no_grad()
def feeds_bos_twice(model, src, bos_id, eos_id, max_len):
    """The decoder input <bos> <bos> w1 ...: not the output so far."""
    memory = model.encode(src, None)
    ys = torch.full((src.shape[0], 1), bos_id, device=src.device)
    while ys.shape[1] < max_len:
        inputs = torch.cat([ys[:, :1], ys], dim=1)
        word = model.decode(inputs, memory, None)[:, -1].argmax(-1)
        ys = torch.cat([ys, word[:, None]], dim=1)
        if (word == eos_id).all():
            break
    return ys


@torch.no_grad()
def greedy_finished_unplaced(model, src, bos_id, eos_id, max_len):
    """The solution with finished made without device=: read (finished.all()) before it meets ys."""
    src_mask = padding_mask(src, model.pad_id)  # (B, 1, 1, n_src)
    memory = model.encode(src, src_mask)
    ys = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool)  # on the CPU, whatever src's device
    while ys.shape[1] < max_len and not finished.all():
        next_word = model.decode(ys, memory, src_mask)[:, -1].argmax(dim=-1)  # (B,)
        next_word = next_word.masked_fill(finished, eos_id)
        ys = torch.cat([ys, next_word[:, None]], dim=1)
        finished |= next_word == eos_id
    return ys


def answers(solution):
    given(globals(), solution)
    return [
        right("solution", solution["greedy_decode"]),
        right("greedy_one_by_one", greedy_one_by_one),
        bug("finished rows padded with pad_id", greedy_pad_after_eos,
            hidden=r"although the sentence had finished", mistake=AFTER_EOS),
        bug("never stops", make_greedy(stop="never"), hidden=r"did not stop"),
        bug("stops at the first eos", make_greedy(stop="first"),
            hidden=r"stopped after 4 tokens.*until all sentences"),
        bug("max_len new tokens", make_greedy(length="new"), hidden=r"max_len counts every token"),
        bug("no bos in the output", make_greedy(bos="drop"), hidden=r"start with bos_id"),
        bug("bos hard-coded", make_greedy(bos="fixed"), hidden=r"start with bos_id=7"),
        bug("never feeds back", make_greedy(feed="bos"), hidden=r"same token"),
        bug("first position", make_greedy(position=0), hidden=r"same token"),
        bug("float ids", make_greedy(dtype=torch.float32), hidden=r"LongTensor"),
        bug("argmax over the batch", greedy_argmax_batch),
        bug("feeds bos twice", feeds_bos_twice, hidden=r"does not follow from the tokens"),
        bug("the notebook's PAD instead of model.pad_id", make_greedy(pad="global"),
            hidden=r"marks the tokens equal to 0 as padding", mistake=GLOBAL_PAD),
        bug("ys made without device=src.device", make_greedy(placed=False), hidden=ON_A_FIXED_DEVICE),
        bug("finished made without device=, read before it meets ys", greedy_finished_unplaced,
            hidden=ON_A_FIXED_DEVICE),
    ]
