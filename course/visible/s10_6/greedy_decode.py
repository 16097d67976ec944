"""``greedy_decode(model, src, bos_id, eos_id, max_len)``: the exercise on a scripted stand-in model,
the explanations both sides give for a wrong token or a wrong length, and its visible check."""

from __future__ import annotations

import torch

from course.checking import (
    Case,
    CheckFailure,
    Exercise,
    Mistake,
    passed,
    visible_check,
)
from course.checking.standins import OFF_SCRIPT, ScriptedModel, expect_token_ids

AFTER_EOS = Mistake("after_eos", "a finished sentence that goes on with other tokens after its eos_id",
                    "Once a sentence has produced eos_id, every later token of its row is eos_id: keep "
                    "track of which sentences have finished.")
GLOBAL_PAD = Mistake(
    "global_pad", "a source mask built with the notebook's PAD instead of the model's pad_id",
    "A model carries its own padding id, model.pad_id: build the source mask with it, so that a model "
    "trained with another pad id never attends to its padding.")


def _case(name: str, seed: int, scripts: list, bos: int, eos: int, max_len: int, kind: str,
          pad: int = 0) -> Case:
    """A case: one script per sentence (the stand-in's greedy choices), bos_id, eos_id, max_len, and the
    model's pad_id (never 5, 6, 7 or 10 + b: the source's real tokens)."""
    return Case(name, seed, {"scripts": scripts, "bos": bos, "eos": eos, "max_len": max_len, "pad": pad},
                kind=kind)


class MaskedScriptedModel(ScriptedModel):
    """The scripted stand-in, with what a real model does besides: it fails, as an nn.Embedding would,
    on ids that are not on its own device, and it records every source mask it is given that does not
    mark its padding (True at real tokens, False at model.pad_id)."""

    def __init__(self, scripts, pad_id: int):
        super().__init__(scripts, pad_id)
        self.wrong_masks: list[tuple[torch.Tensor, torch.Tensor]] = []  # (the mask, the source's ids)

    def _see(self, ids, src_mask, src):
        """``src``: the (rows of the) source the mask belongs to, (b, n_src) ids."""
        if ids.device != self.anchor.device:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two "
                               f"devices, {ids.device} and {self.anchor.device}!")
        if not isinstance(src_mask, torch.Tensor) or src_mask.device != src.device:
            return  # None (no mask): a model's forward builds its own
        real = (src != self.pad_id)[:, None, None, :]  # (b, 1, 1, n_src), True = a real token
        try:
            mask = torch.broadcast_to(src_mask, real.shape)
        except RuntimeError:
            return
        if mask.dtype == torch.bool and not torch.equal(mask, real):
            self.wrong_masks.append((mask.detach().clone(), src.detach().clone()))

    def encode(self, src, src_mask=None):
        self._see(src, src_mask, src)
        return super().encode(src, src_mask)

    def decode(self, tgt, memory, src_mask=None):
        self._see(tgt, src_mask, self.sources[memory[:, 0, 0].round().long().cpu() - 10].to(tgt.device))
        return super().decode(tgt, memory, src_mask)

    def forward(self, src, tgt):
        mask = (src != self.pad_id)[:, None, None, :]
        return self.decode(tgt, self.encode(src, mask), mask)


def scripted_batch(scripts: list[list[int]], device="cpu", pad: int = 0) -> tuple[MaskedScriptedModel,
                                                                                  torch.Tensor]:
    """The scripted model of one script per sentence, whose pad_id is ``pad``, and its source batch (B, 4):
    row b's first token is its key 10 + b, odd rows end with one padding token."""
    keyed = {10 + b: s for b, s in enumerate(scripts)}
    src = torch.tensor([[key, 5, 6, 7][: 4 - b % 2] + [pad] * (b % 2) for b, key in enumerate(keyed)],
                       dtype=torch.long, device=device)
    model = MaskedScriptedModel(keyed, pad).to(device)
    model.sources = src.cpu()  # row b's ids, found again by its key 10 + b (a plain attribute)
    return model, src


CASES = [
    _case("one sentence, <eos> after three words", 740, [[1, 7, 8, 9, 2]], 1, 2, 10, "one sentence"),
    _case("three sentences of different lengths", 741, [[1, 5, 6, 2], [1, 9, 8, 7, 6, 5, 2], [1, 4, 4, 4, 2]],
          1, 2, 12, "a batch"),
    _case("max_len reached before <eos>", 742, [[1, 5, 6, 7, 8, 9, 10, 11, 2], [1, 3, 2]], 1, 2, 5,
          "max_len reached"),
    _case("bos_id=7, eos_id=4", 743, [[7, 5, 9, 5, 4], [7, 4]], 7, 4, 8, "other bos_id and eos_id"),
    _case("an empty translation", 744, [[1, 2]], 1, 2, 6, "an empty translation"),
    _case("model.pad_id=3, a padded sentence", 745, [[1, 5, 6, 2], [1, 7, 8, 9, 2]], 1, 2, 8,
          "another pad_id", pad=3),
]


def why_not_greedy(have: list, want: list, i: int) -> str:
    """What a decoded row says about the loop, from its first wrong token i."""
    generated = have[1:i + 1]
    if len(generated) > 1 and all(t == want[1] for t in generated):
        return ("It keeps predicting the same token: at each step feed everything generated so far "
                "(starting with bos_id) to the decoder, take the logits at the last position, [:, -1], "
                "and append their argmax.")
    if have[i] == OFF_SCRIPT:
        return ("The token does not follow from the tokens before it: at each step the decoder input must "
                "be the whole output so far, bos_id first, and the next token is the argmax of the logits at "
                "its last position.")
    return "Take the argmax over the vocabulary (dim=-1) of the logits at the last position."


def wrong_length(n: int, want: int, eos: int, max_len: int, where: str) -> str | None:
    """Why n tokens per sentence are not the greedy decoder's ``want`` (None when they are)."""
    if n > want:
        return (f"greedy_decode did not stop in {where}: every sentence had produced eos_id={eos} after "
                f"{want} "
                f"tokens, but the output has {n}. Stop as soon as every sentence in the batch has produced "
                "eos_id.")
    if n < want:
        return (f"greedy_decode stopped after {n} tokens in {where}, before every sentence had produced "
                f"eos_id={eos} (or max_len={max_len} was reached). Keep going until all sentences of "
                "the batch "
                "are finished.")
    return None


def until_eos(tokens: torch.Tensor, eos: int) -> torch.Tensor:
    """float64 copy with everything after each row's first eos (after position 0) set to -1."""
    out = tokens.detach().to("cpu", torch.float64).clone()
    for row in out:
        hits = (row[1:] == eos).nonzero()
        if len(hits):
            row[int(hits[0]) + 2:] = -1
    return out


class GreedyDecode(Exercise):
    name = "greedy_decode"
    reference_name = "the greedy choices of a scripted model"
    visible_cases = CASES

    def run(self, impl, case, device):
        p = case.params
        model, src = scripted_batch(p["scripts"], device, p.get("pad", 0))
        with torch.no_grad():
            out = self.call(case, impl, model, src, p["bos"], p["eos"], p["max_len"])
        expect_token_ids(out, "greedy_decode's result", src.shape[0], p["bos"], p["max_len"], str(case))
        if model.wrong_masks:
            self.wrong_mask(model, src, case)
        return {"tokens": out.detach().to("cpu", torch.float64)}

    def wrong_mask(self, model, src, case):
        """Fail on the first source mask that does not mark the model's padding, naming why if it can."""
        (mask, src), pad = model.wrong_masks[0], model.pad_id
        where = (f"greedy_decode gave the model a source mask that does not mark the padding of src "
                 f"(model.pad_id={pad}) in {case}")
        if torch.equal(mask, (src != 0)[:, None, None, :]) and pad != 0:
            raise CheckFailure(f"{where}: it marks the tokens equal to 0 as padding. {GLOBAL_PAD.sentence()}",
                               GLOBAL_PAD)
        raise CheckFailure(f"{where}: the mask should be True at the real tokens and False at the padding, "
                           "shaped as padding_mask's result is.")

    def reference(self, case, device):
        p = case.params
        rows = [s[: p["max_len"]] for s in p["scripts"]]
        n = max(len(r) for r in rows)  # a finished sentence goes on with eos_id
        return {"tokens": torch.tensor([r + [p["eos"]] * (n - len(r)) for r in rows], dtype=torch.float64)}

    def evaluate(self, case, got, device):
        """The first token that is not the script's, then the length, each with what it says."""
        p = case.params
        have, want = got["tokens"].to("cpu"), self.expected(case, device)["tokens"]
        n = have.shape[1]
        m = min(n, want.shape[1])
        wrong = (have[:, :m] != want[:, :m]).nonzero()
        if len(wrong):
            b, i = (int(v) for v in wrong[0])
            finished = (want[b, 1:i] == p["eos"]).any()  # the sentence had produced eos_id before token i
            if finished:
                raise CheckFailure(f"greedy_decode: token {i} of sentence {b} in {case} is not "
                                   f"eos_id={p['eos']}, although the sentence had finished.\n"
                                   f"{AFTER_EOS.sentence()}", AFTER_EOS)
            raise CheckFailure(f"greedy_decode: token {i} of sentence {b} is not the greedy choice in "
                               f"{case}. {why_not_greedy(have[b].tolist(), want[b].tolist(), i)}")
        message = wrong_length(n, want.shape[1], p["eos"], p["max_len"], str(case))
        if message:
            raise CheckFailure(message)


@visible_check
def check_greedy_decode(greedy_decode) -> None:
    """On a scripted stand-in model: bos first, one greedy choice per step, stops at eos or max_len, masks
    the source by the model's pad_id, creates no tensor without a device."""
    GreedyDecode().run_cases(greedy_decode)
    passed("greedy_decode feeds its own words back, stops when every sentence has eos_id, respects max_len, "
           "masks the source padding by model.pad_id and creates its tensors on the device of src.")
