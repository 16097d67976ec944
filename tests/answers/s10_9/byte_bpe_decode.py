"""byte_bpe_decode: right answers written differently (a bytearray filled, then decoded; an incremental
decoder fed token by token), and planted bugs, each a learner's way of making one known mistake."""

import codecs

from course.visible.s10_9.byte_bpe_decode import DROPPED, LATIN1, ONE_BY_ONE
from tests.answers import bug, right

EXERCISE = "byte_bpe_decode"
#: Why the operator walk finds no door (tests/test_operator_walk.py): the reference runs nothing
#: its right answers do not.
NO_SIGNATURE = "plain Python: texts, bytes and merges, no tensor"


def bytearray_once(tokens):
    """A right answer: the bytes gathered in a bytearray, decoded once."""
    buffer = bytearray()
    for token in tokens:
        buffer += token
    return buffer.decode("utf-8", "replace")


def incremental(tokens):
    """A right answer: Python's incremental decoder keeps a character's first bytes until the rest come."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    return "".join(decoder.decode(t) for t in tokens) + decoder.decode(b"", final=True)


def answers(solution):
    return [
        right("solution", solution["byte_bpe_decode"]),
        right("a bytearray, decoded once", bytearray_once),
        right("an incremental decoder", incremental),
        bug("each token decoded on its own",
            lambda tokens: "".join(t.decode("utf-8", "replace") for t in tokens),
            hidden=r"decoded one by one", mistake=ONE_BY_ONE),
        bug("errors='ignore'", lambda tokens: b"".join(tokens).decode("utf-8", "ignore"),
            hidden=r"dropped instead of replaced", mistake=DROPPED),
        bug("latin-1", lambda tokens: b"".join(tokens).decode("latin-1"),
            hidden=r"as Latin-1", mistake=LATIN1),
        bug("errors='strict'", lambda tokens: b"".join(tokens).decode("utf-8"),
            hidden=r"UnicodeDecodeError"),
        bug("bytes returned", lambda tokens: b"".join(tokens), hidden=r"should return a str"),
    ]
