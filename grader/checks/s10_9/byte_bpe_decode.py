"""Hidden check of ``byte_bpe_decode``: the contract's decoder (the tokens joined, decoded once) on more
tokens of the visible kinds.

The decoder lives here, not in the shipped visible check (which holds snapshots of its text,
:data:`course.visible.s10_9.byte_bpe_decode.EXPECTED`, made by :func:`snapshot`)."""

from __future__ import annotations

from course.visible.s10_9.byte_bpe_decode import DROPPED, LATIN1, ONE_BY_ONE, ByteBpeDecode, decode_case
from grader.checks.exercise import GradedExercise, registered
from grader.checks.s10_9.byte_bpe_train import ComputedSnapshots

SWITCHES = {ONE_BY_ONE: {"one_by_one": True}, DROPPED: {"errors": "ignore"}, LATIN1: {"codec": "latin-1"}}


def reference_decode(tokens, *, one_by_one=False, errors="replace", codec="utf-8") -> str:
    """The contract's text of ``tokens``; each keyword switches on one known mistake."""
    if one_by_one:
        return "".join(t.decode(codec, errors=errors) for t in tokens)
    return b"".join(tokens).decode(codec, errors=errors)


CASES = [
    decode_case("the cat. as b' the', b' cat', b'.'",
                "whole characters in each token", [b" the", b" cat", b"."]),
    decode_case("crème as b'cr\\xc3', b'\\xa8me'", "a character split across tokens", [b"cr\xc3", b"\xa8me"]),
    decode_case("東京 as b'\\xe6', b'\\x9d\\xb1\\xe4', b'\\xba\\xac'", "a character split across tokens",
                [b"\xe6", b"\x9d\xb1\xe4", b"\xba\xac"]),
    decode_case("🙃 as b'\\xf0\\x9f', b'\\x99\\x83'", "a character split across tokens",
                [b"\xf0\x9f", b"\x99\x83"]),
    decode_case("a character cut short, then a: b'\\xc3', b'a'", "bytes that are no UTF-8",
                [b"\xc3", b"a"]),
    decode_case("x, two bytes that are no UTF-8, y: b'x', b'\\x80\\xfe', b'y'",
                "bytes that are no UTF-8", [b"x", b"\x80\xfe", b"y"]),
    decode_case("no tokens", "no tokens", []),
]


@registered
class GradedByteBpeDecode(ComputedSnapshots, ByteBpeDecode, GradedExercise):
    switches = SWITCHES

    def cases(self):
        return CASES

    def compute(self, case, **switch):
        return reference_decode(list(case.params["tokens"]), **switch)


def snapshot() -> dict:
    """What the visible check ships instead of this module's code."""
    return GradedByteBpeDecode().snapshots()
