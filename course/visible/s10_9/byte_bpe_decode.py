"""``byte_bpe_decode``: the exercise and its visible check: tokens of whole characters, characters of two to
four bytes split across tokens, bytes that are no UTF-8, no tokens; its known mistakes and the messages
both sides give.

This module ships no decoder: :data:`EXPECTED` holds, for each visible case, the contract's text and
what each known mistake returns where it differs, as grading's decoder computes them (a test holds the
two equal)."""

from __future__ import annotations

import copy

from course.checking import Case, CheckFailure, Mistake, passed, visible_check
from course.visible.s10_9.byte_bpe_train import SnapshotExercise, record

NAME = "byte_bpe_decode"
RULE = ("Join all the tokens into one bytes object, then decode it once as UTF-8 with errors='replace' (a "
        "byte that is no UTF-8 becomes '\\ufffd').")
ONE_BY_ONE = Mistake("decoded_one_by_one", "tokens decoded one by one: a character whose bytes lie in two "
                     "tokens became two '\\ufffd'", "Join the tokens first (b''.join(tokens)) and decode the "
                     "whole sequence once: a token may end inside a character.")
DROPPED = Mistake("invalid_bytes_dropped", "bytes that are no UTF-8 dropped instead of replaced",
                  "Decode with errors='replace': a byte that is no UTF-8 becomes '\\ufffd', so that the "
                  "reader sees something was there.")
LATIN1 = Mistake("decoded_as_latin1", "the bytes decoded as Latin-1 instead of UTF-8",
                 "The tokens are UTF-8 bytes: decode them with 'utf-8' (é is two bytes, b'\\xc3\\xa9', which "
                 "Latin-1 reads as two characters).")
#: The mistakes a wrong text is compared with (the first that matches is named).
MISTAKES = (ONE_BY_ONE, DROPPED, LATIN1)


def decode_case(name: str, kind: str, tokens) -> Case:
    """A case of ``byte_bpe_decode``: its tokens. Kinds: "whole characters in each token", "a character
    split across tokens", "bytes that are no UTF-8", "no tokens"."""
    return Case(name, 0, {"tokens": tuple(tokens)}, kind=kind)


CASES = [
    decode_case("hi there as b'hi', b' the', b're'", "whole characters in each token",
                [b"hi", b" the", b"re"]),
    decode_case("café as b'caf\\xc3', b'\\xa9': é's two bytes in two tokens",
                "a character split across tokens", [b"caf\xc3", b"\xa9"]),
    decode_case("🙂 as four tokens of one byte", "a character split across tokens",
                [bytes([b]) for b in "🙂".encode()]),
    decode_case("straße as b'stra', b'\\xc3', b'\\x9fe'", "a character split across tokens",
                [b"stra", b"\xc3", b"\x9fe"]),
    decode_case("ok then 0xff, which is no UTF-8: b'ok', b'\\xff'",
                "bytes that are no UTF-8", [b"ok", b"\xff"]),
    decode_case("no tokens: the empty text", "no tokens", []),
]


class ByteBpeDecode(SnapshotExercise):
    name = NAME
    reference_name = "the contract's text"
    visible_cases = CASES
    output, what, known, rule = "text", "character", MISTAKES, RULE

    def table(self):
        return EXPECTED

    def run(self, impl, case, device):
        tokens = list(case.params["tokens"])
        given = copy.deepcopy(tokens)
        result = self.call(case, impl, tokens)
        if tokens != given:
            raise CheckFailure(f"{NAME} changed the list of tokens it was given in {case}: leave it as is.")
        if not isinstance(result, str):
            raise CheckFailure(f"{NAME} should return a str (the text), but returned a "
                               f"{type(result).__name__} in {case}.")
        return {"text": record(result)}


@visible_check
def check_byte_bpe_decode(byte_bpe_decode) -> None:
    """Tokens of whole characters, characters split across two to four tokens, a byte that is no UTF-8
    and no tokens: the text."""
    ByteBpeDecode().run_cases(byte_bpe_decode)
    passed("byte_bpe_decode joins the tokens and decodes them once, as UTF-8, replacing what is no UTF-8.")


#: Written by the hidden check's ``snapshot()``: {case: {"reference": text, mistake name: text where
#: that mistake returns another}}.
EXPECTED: dict[str, dict[str, str]] = {
    "hi there as b'hi', b' the', b're'": {
        'reference': 'hi there',
    },
    "café as b'caf\\xc3', b'\\xa9': é's two bytes in two tokens": {
        'reference': 'café',
        'decoded_one_by_one': 'caf��',
        'decoded_as_latin1': 'cafÃ©',
    },
    '🙂 as four tokens of one byte': {
        'reference': '🙂',
        'decoded_one_by_one': '����',
        'decoded_as_latin1': 'ð\x9f\x99\x82',
    },
    "straße as b'stra', b'\\xc3', b'\\x9fe'": {
        'reference': 'straße',
        'decoded_one_by_one': 'stra��e',
        'decoded_as_latin1': 'straÃ\x9fe',
    },
    "ok then 0xff, which is no UTF-8: b'ok', b'\\xff'": {
        'reference': 'ok�',
        'invalid_bytes_dropped': 'ok',
        'decoded_as_latin1': 'okÿ',
    },
    'no tokens: the empty text': {
        'reference': '',
    },
}
