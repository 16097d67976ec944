"""Generate the French-to-English corpus for section 10.6 ("A translator that works").

Run ``python data/make_corpus.py`` to rewrite ``data/fr_en.tsv`` (or pass another
output path).  The script uses only the standard library and a fixed seed, so it
writes the same bytes every time.  ``data/README.md`` explains the grammar.

A sentence is SUBJECT VERB OBJECT, e.g.::

    le petit chat noir mange de la soupe   ->   the small black cat eats soup
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

SEED = 106
SIZES = {"train": 5000, "valid": 400, "test": 400, "long": 400}
LONG_FROM = 8  # French words: sentences this long are held out in "long", longer than all others
ANCHOR = ("nous mangeons du pain", "we eat bread")  # always in the test split
OUT_PATH = Path(__file__).resolve().parent / "fr_en.tsv"

# Probabilities used when sampling a sentence.
P_PRONOUN_SUBJECT = 0.4
P_PLURAL = 0.4
P_DEFINITE = 0.5
P_PARTITIVE = 0.6  # mass nouns: "du pain" rather than "le pain"
P_SIZE_ADJ = 0.25  # "petit"/"grand", before the noun in both languages
P_COLOUR_ADJ = 0.45  # colours, after the noun in French, before it in English


@dataclass(frozen=True)
class Noun:
    """A noun: French forms and gender, English forms, and what kind of thing it is."""

    fr_sg: str
    fr_pl: str
    gender: str  # "m" or "f"
    en_sg: str
    en_pl: str
    kind: str  # "animal", "thing", "food" (countable) or "mass" (uncountable)


@dataclass(frozen=True)
class Adjective:
    """An adjective: French forms (m.sg, f.sg, m.pl, f.pl), English word, French position."""

    fr: tuple[str, str, str, str]
    en: str
    before_noun: bool  # French position; in English every adjective comes first

    def form(self, gender: str, plural: bool) -> str:
        """The French form agreeing with a noun of this gender and number."""
        return self.fr[(gender == "f") + 2 * plural]


@dataclass(frozen=True)
class Verb:
    """A verb: French present tense (je, tu, il, nous, vous, ils), English forms, objects."""

    fr: tuple[str, str, str, str, str, str]
    en: str
    en_3sg: str
    objects: tuple[str, ...]  # noun kinds allowed as direct object


NOUNS = [
    Noun("chat", "chats", "m", "cat", "cats", "animal"),
    Noun("chien", "chiens", "m", "dog", "dogs", "animal"),
    Noun("cheval", "chevaux", "m", "horse", "horses", "animal"),
    Noun("oiseau", "oiseaux", "m", "bird", "birds", "animal"),
    Noun("souris", "souris", "f", "mouse", "mice", "animal"),
    Noun("vache", "vaches", "f", "cow", "cows", "animal"),
    Noun("livre", "livres", "m", "book", "books", "thing"),
    Noun("maison", "maisons", "f", "house", "houses", "thing"),
    Noun("voiture", "voitures", "f", "car", "cars", "thing"),
    Noun("fleur", "fleurs", "f", "flower", "flowers", "thing"),
    Noun("gâteau", "gâteaux", "m", "cake", "cakes", "food"),
    Noun("pomme", "pommes", "f", "apple", "apples", "food"),
    Noun("pain", "", "m", "bread", "", "mass"),
    Noun("fromage", "", "m", "cheese", "", "mass"),
    Noun("soupe", "", "f", "soup", "", "mass"),
    Noun("viande", "", "f", "meat", "", "mass"),
]

ADJECTIVES = [
    Adjective(("petit", "petite", "petits", "petites"), "small", before_noun=True),
    Adjective(("grand", "grande", "grands", "grandes"), "big", before_noun=True),
    Adjective(("noir", "noire", "noirs", "noires"), "black", before_noun=False),
    Adjective(("blanc", "blanche", "blancs", "blanches"), "white", before_noun=False),
    Adjective(("vert", "verte", "verts", "vertes"), "green", before_noun=False),
    Adjective(("gris", "grise", "gris", "grises"), "grey", before_noun=False),
    Adjective(("rouge", "rouge", "rouges", "rouges"), "red", before_noun=False),
]

ALL_KINDS = ("animal", "thing", "food", "mass")
VERBS = [
    Verb(("mange", "manges", "mange", "mangeons", "mangez", "mangent"), "eat", "eats",
         ("food", "mass")),
    Verb(("vois", "vois", "voit", "voyons", "voyez", "voient"), "see", "sees", ALL_KINDS),
    Verb(("regarde", "regardes", "regarde", "regardons", "regardez", "regardent"),
         "watch", "watches", ALL_KINDS),
    Verb(("prends", "prends", "prend", "prenons", "prenez", "prennent"), "take", "takes",
         ALL_KINDS),
    Verb(("veux", "veux", "veut", "voulons", "voulez", "veulent"), "want", "wants",
         ALL_KINDS),
    Verb(("trouve", "trouves", "trouve", "trouvons", "trouvez", "trouvent"), "find", "finds",
         ALL_KINDS),
]

# (French pronoun, English pronoun, person index 0..5 into Verb.fr)
PRONOUNS = [
    ("je", "I", 0), ("tu", "you", 1), ("il", "he", 2), ("elle", "she", 2),
    ("nous", "we", 3), ("vous", "you", 4), ("ils", "they", 5), ("elles", "they", 5),
]

Phrase = tuple[list[str], list[str]]  # (French tokens, English tokens)


def english_verb(verb: Verb, person: int) -> str:
    """English agrees only in the third person singular: he eats, we eat."""
    return verb.en_3sg if person == 2 else verb.en


def count_determiner(noun: Noun, plural: bool, definite: bool, size_adj: bool) -> Phrase:
    """Determiner of a countable noun: le/la/les -> the, un/une -> a(n), des -> nothing."""
    if definite:
        fr = "les" if plural else ("la" if noun.gender == "f" else "le")
        return [fr], ["the"]
    if plural:  # "des chats" -> "cats", but "de petits chats" -> "small cats"
        return ["de" if size_adj else "des"], []
    return ["une" if noun.gender == "f" else "un"], ["a"]


def mass_determiner(noun: Noun, partitive: bool) -> Phrase:
    """Determiner of a mass noun: du/de la -> nothing, le/la -> the."""
    if partitive:
        return (["de", "la"] if noun.gender == "f" else ["du"]), []
    return (["la"] if noun.gender == "f" else ["le"]), ["the"]


def fix_a_an(words: list[str]) -> list[str]:
    """English 'a' becomes 'an' before a vowel: an apple, a red apple."""
    out = list(words)
    for i in range(len(out) - 1):
        if out[i] == "a" and out[i + 1][0] in "aeiou":
            out[i] = "an"
    return out


def noun_phrase(rng: random.Random, kinds: tuple[str, ...]) -> tuple[Phrase, int]:
    """Sample a noun phrase of one of ``kinds``; also return its person (2 or 5)."""
    noun = rng.choice([n for n in NOUNS if n.kind in kinds])
    mass = noun.kind == "mass"
    plural = not mass and rng.random() < P_PLURAL
    size = None if mass or rng.random() >= P_SIZE_ADJ else rng.choice(ADJECTIVES[:2])
    colour = rng.choice(ADJECTIVES[2:]) if rng.random() < P_COLOUR_ADJ else None
    if mass:
        fr, en = mass_determiner(noun, rng.random() < P_PARTITIVE)
    else:
        fr, en = count_determiner(noun, plural, rng.random() < P_DEFINITE, size is not None)
    if size:
        fr, en = fr + [size.form(noun.gender, plural)], en + [size.en]
    fr = fr + [noun.fr_pl if plural else noun.fr_sg]
    if colour:
        fr, en = fr + [colour.form(noun.gender, plural)], en + [colour.en]
    en = en + [noun.en_pl if plural else noun.en_sg]
    return (fr, fix_a_an(en)), (5 if plural else 2)


def subject(rng: random.Random) -> tuple[Phrase, int]:
    """Sample a subject: a pronoun or an animal noun phrase; also return its person."""
    if rng.random() < P_PRONOUN_SUBJECT:
        fr, en, person = rng.choice(PRONOUNS)
        return ([fr], [en]), person
    return noun_phrase(rng, ("animal",))


def sentence(rng: random.Random) -> tuple[str, str]:
    """Sample one (French, English) sentence pair."""
    (subj_fr, subj_en), person = subject(rng)
    verb = rng.choice(VERBS)
    (obj_fr, obj_en), _ = noun_phrase(rng, verb.objects)
    fr = subj_fr + [verb.fr[person]] + obj_fr
    en = subj_en + [english_verb(verb, person)] + obj_en
    return " ".join(fr), " ".join(en)


def unique_pairs(rng: random.Random, n_short: int, n_long: int) -> tuple[dict[str, str], dict[str, str]]:
    """Sample pairs until there are ``n_short`` distinct French sentences shorter than
    ``LONG_FROM`` words (not counting ANCHOR) and ``n_long`` distinct longer ones."""
    short: dict[str, str] = {}
    long: dict[str, str] = {}
    while len(short) < n_short or len(long) < n_long:
        fr, en = sentence(rng)
        pool, size = (long, n_long) if len(fr.split()) >= LONG_FROM else (short, n_short)
        if fr != ANCHOR[0] and len(pool) < size:
            assert pool.setdefault(fr, en) == en, f"two translations for {fr!r}"
    return short, long


def make_rows(seed: int = SEED) -> list[tuple[str, str, str]]:
    """All (split, french, english) rows: unique French sentences, ANCHOR in test, the
    sentences of LONG_FROM words or more in "long" only."""
    rng = random.Random(seed)
    held_short = sum(n for split, n in SIZES.items() if split != "long") - 1
    short, long = unique_pairs(rng, held_short, SIZES["long"])
    pairs = list(short.items())
    rng.shuffle(pairs)
    pairs.insert(SIZES["train"] + SIZES["valid"], ANCHOR)  # first test row
    pairs += list(long.items())
    rows, start = [], 0
    for split, size in SIZES.items():
        rows += [(split, fr, en) for fr, en in pairs[start:start + size]]
        start += size
    check_vocab_coverage(rows)
    return rows


def check_vocab_coverage(rows: list[tuple[str, str, str]]) -> None:
    """Fail if a valid/test sentence uses a word that never occurs in train."""
    seen = {w for split, fr, en in rows if split == "train" for w in (fr + " " + en).split()}
    for split, fr, en in rows:
        missing = [w for w in (fr + " " + en).split() if w not in seen]
        assert not missing, f"{split} row {fr!r} uses words not in train: {missing}"


def write_tsv(rows: list[tuple[str, str, str]], path: Path) -> None:
    """Write a header and the rows as UTF-8, tab-separated, with '\\n' line ends."""
    lines = ["split\tfrench\tenglish"] + ["\t".join(row) for row in rows]
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8"))


def main(argv: list[str]) -> None:
    path = Path(argv[1]) if len(argv) > 1 else OUT_PATH
    rows = make_rows()
    write_tsv(rows, path)
    print(f"wrote {len(rows)} pairs to {path}")


if __name__ == "__main__":
    main(sys.argv)
