"""The picture of the whole: the encoder-decoder Transformer, drawn with matplotlib.

``architecture(highlight)`` draws the model of *Attention Is All You Need* (inputs,
embeddings, positional encodings, N× encoder blocks, N× decoder blocks with masked
self-attention, cross-attention and feed-forward sublayers, residuals and norms, linear
and softmax) and lights the named parts, graying the rest. Every notebook opens with it,
its own section's parts lit (``SECTIONS``); 10.7 opens with its own picture, a GPT beside a
Llama (``DECODER_ONLY_PARTS``). ``attention_head_shapes`` draws one head of 10.2 as the
matrix products it is, with their shapes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import matplotlib.pyplot as plt
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle

#: Every part of the drawing, with what it is.
PARTS = {
    "inputs": "the source tokens",
    "input_embedding": "the source embedding: one vector per token (X)",
    "input_positions": "the positional encoding added to the source embeddings",
    "encoder_qkv": "queries, keys and values of the encoder's self-attention, from its input",
    "encoder_self_attention": "the encoder's multi-head self-attention",
    "encoder_add_norm_1": "residual add and LayerNorm after the encoder's attention",
    "encoder_feed_forward": "the encoder's position-wise feed-forward network",
    "encoder_add_norm_2": "residual add and LayerNorm after the encoder's feed-forward network",
    "encoder_residuals": "the encoder block's residual connections",
    "encoder_stack": "the encoder block, stacked N times",
    "memory": "the encoder's output (the memory), read by every decoder block",
    "outputs": "the target tokens so far (shifted right)",
    "output_embedding": "the target embedding",
    "output_positions": "the positional encoding added to the target embeddings",
    "decoder_self_qkv": "queries, keys and values of the decoder's masked self-attention",
    "decoder_self_attention": "the decoder's masked multi-head self-attention (the causal mask)",
    "decoder_add_norm_1": "residual add and LayerNorm after the masked self-attention",
    "decoder_cross_qkv": "queries from the decoder, keys and values from the memory",
    "decoder_cross_attention": "cross-attention: the decoder reads the encoder's memory",
    "decoder_add_norm_2": "residual add and LayerNorm after the cross-attention",
    "decoder_feed_forward": "the decoder's position-wise feed-forward network",
    "decoder_add_norm_3": "residual add and LayerNorm after the decoder's feed-forward network",
    "decoder_residuals": "the decoder block's residual connections",
    "decoder_stack": "the decoder block, stacked N times",
    "linear": "the final linear layer: one score (logit) per word of the target vocabulary",
    "softmax": "the softmax over the vocabulary: the probabilities of the next word",
}

ATTENTION_BLOCKS = ("encoder_self_attention", "decoder_self_attention", "decoder_cross_attention")
QKV_ARROWS = ("encoder_qkv", "decoder_self_qkv", "decoder_cross_qkv")
ENCODER_BLOCK = ("encoder_stack", "encoder_qkv", "encoder_self_attention", "encoder_add_norm_1",
                 "encoder_feed_forward", "encoder_add_norm_2", "encoder_residuals")

#: The parts of the decoder-only picture: a GPT (left) and a Llama (right), both pre-norm.
DECODER_ONLY_PARTS = {
    **{f"{m}_{part}": f"{name}: {what}" for m, name in (("gpt", "the GPT"), ("llama", "the Llama"))
       for part, what in (
        ("tokens", "the tokens so far"),
        ("embedding", "the token embedding"),
        ("norm_1", "the norm before the attention (pre-norm)"),
        ("attention", "masked multi-head self-attention (the causal mask)"),
        ("norm_2", "the norm before the feed-forward network"),
        ("feed_forward", "the feed-forward network"),
        ("residuals", "the residual adds: each sublayer's output added to its input"),
        ("stack", "the pre-norm block, stacked N times"),
        ("final_norm", "the final norm that a pre-norm stack ends with"),
        ("head", "the output layer: one logit per token of the vocabulary"),
        ("tied", "the output layer's weight is the token embedding's (tied)"),
        ("softmax", "the softmax: the probabilities of the next token"))},
    "gpt_positions": "the GPT: learned positions, one vector per position up to max_len, added",
    "llama_rotary": "the Llama: rotary positions, turning q and k in every attention (10.4's apply_rotary)",
    # Meta's LLaMA has an output matrix of its own; ours keeps the GPT's tie (10.7 says why)
    "llama_tied": "the Llama: the output layer's weight is the token embedding's (tied, as our GPT's; "
                  "Meta's LLaMA keeps two matrices)",
}
#: What 10.7 lights: everything but the GPT's block, which is 10.5's (norm_first=True).
DECODER_ONLY_SECTION = tuple(p for p in DECODER_ONLY_PARTS if p not in (
    "gpt_norm_1", "gpt_attention", "gpt_norm_2", "gpt_feed_forward", "gpt_residuals"))

#: What each section builds, lit in the picture at the top of its notebook.
SECTIONS = {
    "10.1": ("input_embedding", *QKV_ARROWS),
    "10.2": ATTENTION_BLOCKS,
    "10.3": (*ATTENTION_BLOCKS, *QKV_ARROWS),
    "10.4": ("input_positions", "output_positions"),
    "10.5": ENCODER_BLOCK,
    "10.6": ("memory", "decoder_stack", "decoder_self_qkv", "decoder_self_attention",
             "decoder_add_norm_1", "decoder_cross_qkv", "decoder_cross_attention", "decoder_add_norm_2",
             "decoder_feed_forward", "decoder_add_norm_3", "decoder_residuals", "linear", "softmax"),
    "10.7": DECODER_ONLY_SECTION,  # parts of the decoder-only picture
    "10.8": ("outputs", "decoder_self_qkv", "decoder_cross_qkv", "softmax"),  # what decoding changes
    "10.9": ("gpt_tokens", "gpt_embedding", "gpt_head", "gpt_tied", "gpt_softmax"),  # what tokens change
}
CAPTIONS = {
    "10.1": "10.1: queries, keys and values, three projections of each attention's input:\n"
            "of X in self-attention; in cross-attention K and V come from the memory",
    "10.2": "10.2: one head of scaled dot-product attention runs inside each attention block",
    "10.3": "10.3: the multi-head attention sublayers: several heads side by side, mixed by W_O",
    "10.4": "10.4: the positional encoding, added (+) to the token embeddings at both inputs",
    "10.5": "10.5: the encoder block, attention and feed-forward with residuals and norms, stacked N times",
    "10.6": "10.6: the decoder, joined to the encoder by cross-attention, and the output layer",
    "10.7": "10.7: two decoder-only models, pre-norm, with a final norm and a tied output layer\n"
            "(Meta's LLaMA has its own; ours keeps the GPT's tie);\n"
            "in colour what this notebook builds (the GPT's block is 10.5's)",
    "10.8": "10.8: decoding: a word chosen from the softmax is fed back as the next output;\n"
            "the keys and values of the decoder's attention are cached",
    "10.9": "10.9: 10.7's GPT unchanged inside; the tokens it reads and the vocabulary of its\n"
            "embedding, output layer and softmax change with the tokenizer",
}

COLOURS = {"attention": "#f9c98a", "norm": "#f3ef9f", "feed": "#a9d3f2", "embedding": "#f5b5c4",
           "linear": "#cbbdf0", "softmax": "#b9e6b0", "positions": "#9fd8cf", "frame": "#f4f4f4",
           "arrow": "#333333", "text": "#111111"}
QKV_STYLE = {"colour": "#b5451b", "width": 1.6}  # the arrows that carry queries, keys and values
GRAY = {"face": "#f0f0f0", "edge": "#c8c8c8", "text": "#b0b0b0", "frame": "#fafafa"}


@dataclass
class _Canvas:
    """The axes, and the artists of every part, so that a part can be lit or grayed at the end."""

    ax: object
    artists: dict[str, list] = field(default_factory=dict)

    def keep(self, part: str, artist, kind: str):
        self.artists.setdefault(part, []).append((artist, kind))
        return artist

    def box(self, part, x, y, w, h, text, colour, fontsize=8.5):
        patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.08",
                               facecolor=colour, edgecolor="#555555", linewidth=1.0, zorder=3)
        self.keep(part, self.ax.add_patch(patch), "face")
        self.keep(part, self.ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=4,
                                     color=COLOURS["text"]), "text")

    def arrow(self, part, start, end, *, style="-|>", colour=COLOURS["arrow"], width=1.1):
        patch = FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9, linewidth=width,
                                color=colour, zorder=2, shrinkA=0, shrinkB=0)
        self.keep(part, self.ax.add_patch(patch), "line")

    def label(self, part, x, y, text, **options):
        options = {"ha": "center", "va": "center", "fontsize": 8, "color": COLOURS["text"], **options}
        self.keep(part, self.ax.text(x, y, text, zorder=4, **options), "text")

    def plus(self, part, x, y, colour="white"):
        self.keep(part, self.ax.add_patch(Circle((x, y), 0.16, facecolor=colour, edgecolor="#555555",
                                                 zorder=3)), "face")
        self.keep(part, self.ax.text(x, y - 0.01, "+", ha="center", va="center", fontsize=11, zorder=4,
                                     color=COLOURS["text"]), "text")

    def frame(self, part, x, y, w, h, repeat):
        patch = FancyBboxPatch((x - w / 2, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.15",
                               facecolor=COLOURS["frame"], edgecolor="#777777", linewidth=1.2, zorder=1)
        self.keep(part, self.ax.add_patch(patch), "frame")
        side = x - w / 2 - 0.25 if repeat == "left" else x + w / 2 + 0.25
        self.label(part, side, y + h / 2, "N×", fontsize=11, fontweight="bold")
        self.keep(part, patch, "frame")

    def paint(self, lit: set[str]) -> None:
        """Gray every part not in ``lit`` (all parts are lit when ``lit`` is empty)."""
        for part, artists in self.artists.items():
            if not lit or part in lit:
                continue
            for artist, kind in artists:
                if kind == "face":
                    artist.set_facecolor(GRAY["face"])
                    artist.set_edgecolor(GRAY["edge"])
                elif kind == "frame":
                    artist.set_facecolor(GRAY["frame"])
                    artist.set_edgecolor(GRAY["edge"])
                elif kind == "line":
                    artist.set_color(GRAY["edge"])
                else:
                    artist.set_color(GRAY["text"])


def _sublayer_stack(c: _Canvas, x: float, layers, bottom: float) -> dict:
    """The boxes of a block, bottom to top: ``layers`` are (part, text, colour); returns their y."""
    ys = {}
    for i, (part, text, colour) in enumerate(layers):
        ys[part] = bottom + 0.72 * i
        c.box(part, x, ys[part], 2.0, 0.42, text, colour)
    return ys


def _block_arrows(c: _Canvas, x: float, ys: dict, order, residual: str) -> None:
    """Straight arrows from box to box, and a residual path from below each sublayer to its add & norm."""
    for lower, upper in zip(order, order[1:]):
        c.arrow(upper, (x, ys[lower] + 0.21), (x, ys[upper] - 0.21))
    for sublayer, norm in zip(order[::2], order[1::2]):
        start = ys[sublayer] - 0.45
        side = x - 1.22
        c.arrow(residual, (x, start), (side, start), style="-")
        c.arrow(residual, (side, start), (side, ys[norm]), style="-")
        c.arrow(residual, (side, ys[norm]), (x - 1.0, ys[norm]))


def picture_of(lit: set[str]):
    """(parts, draw) of the picture that has the parts ``lit``: the decoder-only one for its own
    parts, else the encoder-decoder."""
    decoder_only = lit and lit <= set(DECODER_ONLY_PARTS)
    return (DECODER_ONLY_PARTS, _draw_decoder_only) if decoder_only else (PARTS, _draw)


def architecture(highlight: str | Iterable[str] = (), *, title: str | None = None, ax=None):
    """Draw the encoder-decoder Transformer (the decoder-only models for "10.7" or parts of
    ``DECODER_ONLY_PARTS``); light ``highlight`` (a section such as "10.5", or part names),
    gray the rest. Returns the figure."""
    lit = set(SECTIONS[highlight]) if isinstance(highlight, str) and highlight in SECTIONS else \
        {highlight} if isinstance(highlight, str) else set(highlight)
    parts, draw = picture_of(lit)
    unknown = sorted(lit - set(parts))
    if unknown:
        raise ValueError(f"unknown parts {unknown}; the parts are: {', '.join(parts)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.2, 7.4))
    draw(ax).paint(lit)
    ax.set_xlim(0, 8.8)
    ax.set_ylim(-0.1, 8.8)
    ax.set_aspect("equal")
    ax.axis("off")
    caption = CAPTIONS.get(highlight) if isinstance(highlight, str) else None
    if title or caption:
        ax.set_title(title or caption, fontsize=10)
    ax.figure.tight_layout()
    return ax.figure


def _draw(ax) -> _Canvas:
    """Every part, in colour; returns the canvas, which knows each part's artists."""
    c = _Canvas(ax)
    enc_x, dec_x = 2.2, 6.6

    # ---- inputs, embeddings and positions (both sides)
    for side, x, words, embed, positions in (
            ("inputs", enc_x, "inputs: nous mangeons du pain", "input_embedding", "input_positions"),
            ("outputs", dec_x, "outputs (shifted right): <bos> we eat", "output_embedding",
             "output_positions")):
        c.label(side, x, 0.15, words, fontsize=8.5, style="italic")
        c.arrow(side, (x, 0.35), (x, 0.75))
        c.box(embed, x, 0.97, 2.0, 0.42, "embedding", COLOURS["embedding"])
        c.arrow(embed, (x, 1.18), (x, 1.62))
        c.plus(positions, x, 1.78, COLOURS["positions"])  # the sum: embedding + positional encoding
        towards = 1 if side == "inputs" else -1  # the encoding sits outside, its arrow points in
        wave_x = x - towards * 1.25
        c.box(positions, wave_x, 1.78, 1.1, 0.5, "∿ positional\nencoding", COLOURS["positions"], fontsize=7.5)
        c.arrow(positions, (wave_x + towards * 0.57, 1.78), (x - towards * 0.16, 1.78))

    # ---- encoder block
    c.frame("encoder_stack", enc_x, 2.15, 2.9, 3.1, "left")
    enc_order = ("encoder_self_attention", "encoder_add_norm_1", "encoder_feed_forward",
                 "encoder_add_norm_2")
    enc = _sublayer_stack(c, enc_x, [
        ("encoder_self_attention", "multi-head\nattention", COLOURS["attention"]),
        ("encoder_add_norm_1", "add & norm", COLOURS["norm"]),
        ("encoder_feed_forward", "feed-forward", COLOURS["feed"]),
        ("encoder_add_norm_2", "add & norm", COLOURS["norm"])], 2.95)
    _block_arrows(c, enc_x, enc, enc_order, "encoder_residuals")
    c.arrow("input_positions", (enc_x, 1.94), (enc_x, 2.35))
    for dx, letter in ((-0.55, "V"), (0.0, "K"), (0.55, "Q")):
        c.arrow("encoder_qkv", (enc_x + dx, 2.35), (enc_x + dx, 2.74), **QKV_STYLE)
        c.label("encoder_qkv", enc_x + dx + 0.13, 2.55, letter, fontsize=7)

    # ---- decoder block
    c.frame("decoder_stack", dec_x, 2.15, 2.9, 4.55, "right")
    dec_order = ("decoder_self_attention", "decoder_add_norm_1", "decoder_cross_attention",
                 "decoder_add_norm_2", "decoder_feed_forward", "decoder_add_norm_3")
    dec = _sublayer_stack(c, dec_x, [
        ("decoder_self_attention", "masked multi-head\nattention", COLOURS["attention"]),
        ("decoder_add_norm_1", "add & norm", COLOURS["norm"]),
        ("decoder_cross_attention", "multi-head\ncross-attention", COLOURS["attention"]),
        ("decoder_add_norm_2", "add & norm", COLOURS["norm"]),
        ("decoder_feed_forward", "feed-forward", COLOURS["feed"]),
        ("decoder_add_norm_3", "add & norm", COLOURS["norm"])], 2.95)
    for lower, upper in zip(dec_order, dec_order[1:]):
        if upper == "decoder_cross_attention":
            continue  # the query arrow of the cross-attention is drawn with K and V below
        c.arrow(upper, (dec_x, dec[lower] + 0.21), (dec_x, dec[upper] - 0.21))
    for sublayer, norm in zip(dec_order[::2], dec_order[1::2]):
        start = dec[sublayer] - 0.45 + (0.1 if sublayer != "decoder_self_attention" else 0)
        side = dec_x + 1.22
        c.arrow("decoder_residuals", (dec_x, start), (side, start), style="-")
        c.arrow("decoder_residuals", (side, start), (side, dec[norm]), style="-")
        c.arrow("decoder_residuals", (side, dec[norm]), (dec_x + 1.0, dec[norm]))
    c.arrow("output_positions", (dec_x, 1.94), (dec_x, 2.35))
    for dx, letter in ((-0.55, "V"), (0.0, "K"), (0.55, "Q")):
        c.arrow("decoder_self_qkv", (dec_x + dx, 2.35), (dec_x + dx, 2.74), **QKV_STYLE)
        c.label("decoder_self_qkv", dec_x + dx + 0.13, 2.55, letter, fontsize=7)
    cross_y = dec["decoder_cross_attention"]
    c.arrow("decoder_cross_qkv", (dec_x + 0.55, dec["decoder_add_norm_1"] + 0.21),
            (dec_x + 0.55, cross_y - 0.21), **QKV_STYLE)
    c.label("decoder_cross_qkv", dec_x + 0.7, cross_y - 0.36, "Q", fontsize=7)
    for dx, letter in ((-0.55, "V"), (0.0, "K")):
        c.arrow("decoder_cross_qkv", (dec_x + dx, cross_y - 0.45), (dec_x + dx, cross_y - 0.21), **QKV_STYLE)
        c.label("decoder_cross_qkv", dec_x + dx + 0.13, cross_y - 0.36, letter, fontsize=7)

    # ---- the memory: from the top of the encoder to the cross-attention's keys and values
    top = enc["encoder_add_norm_2"] + 0.21
    c.arrow("memory", (enc_x, top), (enc_x, 5.6), style="-")
    c.arrow("memory", (enc_x, 5.6), (4.4, 5.6), style="-")
    c.arrow("memory", (4.4, 5.6), (4.4, cross_y - 0.45), style="-")
    c.arrow("memory", (4.4, cross_y - 0.45), (dec_x, cross_y - 0.45), style="-")
    c.label("memory", 3.3, 5.75, "memory", fontsize=8, style="italic")

    # ---- output layer
    head = dec["decoder_add_norm_3"] + 0.21
    c.box("linear", dec_x, 7.25, 2.0, 0.4, "linear", COLOURS["linear"])
    c.arrow("linear", (dec_x, head), (dec_x, 7.05))
    c.box("softmax", dec_x, 7.9, 2.0, 0.4, "softmax", COLOURS["softmax"])
    c.arrow("softmax", (dec_x, 7.45), (dec_x, 7.7))
    c.arrow("softmax", (dec_x, 8.1), (dec_x, 8.35))
    c.label("softmax", dec_x, 8.5, "probabilities of the next word", fontsize=8.5, style="italic")
    c.label("encoder_stack", enc_x, 5.95, "encoder", fontsize=10, fontweight="bold")
    c.label("decoder_stack", dec_x - 1.8, 6.9, "decoder", fontsize=10, fontweight="bold")

    return c


# ---------------------------------------------------------------- 10.7: decoder-only models

def _draw_decoder_only(ax) -> _Canvas:
    """The GPT (learned positions, LayerNorm, GELU) beside the Llama (rotary, RMSNorm, SwiGLU)."""
    c = _Canvas(ax)
    for m, x, norm, ffn in (("gpt", 2.2, "LayerNorm", "feed-forward (GELU)"),
                            ("llama", 6.6, "RMSNorm", "SwiGLU feed-forward")):
        c.label(f"{m}_stack", x, 8.75, "GPT" if m == "gpt" else "Llama", fontsize=11, fontweight="bold")
        c.label(f"{m}_tokens", x, 0.15, "<bos> we eat", fontsize=8.5, style="italic")
        c.arrow(f"{m}_tokens", (x, 0.35), (x, 0.75))
        c.box(f"{m}_embedding", x, 0.97, 2.0, 0.42, "token embedding", COLOURS["embedding"])
        if m == "gpt":
            c.arrow(f"{m}_embedding", (x, 1.18), (x, 1.62))
            c.plus("gpt_positions", x, 1.78, COLOURS["positions"])
            c.box("gpt_positions", x - 1.3, 1.78, 1.2, 0.5, "learned\npositions", COLOURS["positions"],
                  fontsize=7.5)
            c.arrow("gpt_positions", (x - 0.7, 1.78), (x - 0.16, 1.78))
            c.arrow("gpt_positions", (x, 1.94), (x, 2.4))
        else:
            c.arrow(f"{m}_embedding", (x, 1.18), (x, 2.4))
            c.label(f"{m}_embedding", x + 0.75, 1.78, "no position\nvectors", fontsize=7, style="italic")
        _pre_norm_block(c, m, x, norm, ffn)
        c.box(f"{m}_final_norm", x, 6.75, 2.0, 0.4, f"final {norm}", COLOURS["norm"])
        c.box(f"{m}_head", x, 7.45, 2.0, 0.4, "linear (tied)", COLOURS["linear"])
        c.arrow(f"{m}_head", (x, 6.95), (x, 7.25))
        c.box(f"{m}_softmax", x, 8.05, 2.0, 0.36, "softmax", COLOURS["softmax"])
        c.arrow(f"{m}_softmax", (x, 7.65), (x, 7.87))
        c.arrow(f"{m}_softmax", (x, 8.23), (x, 8.45))
        side = x + 1.6  # the tie: the head's weight is the embedding's
        for start, end in (((x + 1.0, 0.97), (side, 0.97)), ((side, 0.97), (side, 7.45)),
                           ((side, 7.45), (x + 1.0, 7.45))):
            c.arrow(f"{m}_tied", start, end, style="-", colour=COLOURS["linear"], width=1.4)
        tie = "one matrix: tied" if m == "gpt" else "tied here (LLaMA: untied)"
        c.label(f"{m}_tied", side + 0.15, 4.2, tie,
                rotation=90, fontsize=7.5)
    return c


def _pre_norm_block(c: _Canvas, m: str, x: float, norm: str, ffn: str) -> None:
    """x + attention(norm(x)), then h + ffn(norm(h)): the residual stream passes each sublayer by."""
    c.frame(f"{m}_stack", x, 2.25, 2.9, 4.1, "left")
    ys, adds, half = (2.8, 3.65, 4.85, 5.55), (4.3, 6.05), 0.36 if m == "llama" else 0.25  # half: attention's
    for part, text, colour, y in ((f"{m}_norm_1", norm, COLOURS["norm"], ys[0]),
                                  (f"{m}_norm_2", norm, COLOURS["norm"], ys[2]),
                                  (f"{m}_feed_forward", ffn, COLOURS["feed"], ys[3])):
        c.box(part, x, y, 2.0, 0.4, text, colour, fontsize=8)
    if m == "llama":  # q and k turned by their positions inside the attention
        c.box(f"{m}_attention", x, ys[1], 2.0, 2 * half, "", COLOURS["attention"])
        c.label(f"{m}_attention", x, ys[1] + 0.11, "masked multi-head\nattention", fontsize=8)
        c.box("llama_rotary", x, ys[1] - 0.21, 1.7, 0.2, "rotary on q, k", COLOURS["positions"],
              fontsize=7)
    else:
        c.box(f"{m}_attention", x, ys[1], 2.0, 2 * half, "masked multi-head\nattention", COLOURS["attention"],
              fontsize=8)
    for lower, norm_y, add, part in ((2.45, ys[0], adds[0], f"{m}_norm_1"), (adds[0] + 0.16, ys[2], adds[1],
                                                                                f"{m}_norm_2")):
        c.arrow(part, (x, lower), (x, norm_y - 0.2))  # the stream into the norm
        branch, side = lower + 0.1, x + 1.25  # ... and around the sublayer into the (+)
        c.arrow(f"{m}_residuals", (x, branch), (side, branch), style="-")
        c.arrow(f"{m}_residuals", (side, branch), (side, add), style="-")
        c.arrow(f"{m}_residuals", (side, add), (x + 0.16, add))
        c.plus(f"{m}_residuals", x, add)
    c.arrow(f"{m}_attention", (x, ys[0] + 0.2), (x, ys[1] - half))
    c.arrow(f"{m}_attention", (x, ys[1] + half), (x, adds[0] - 0.16))
    c.arrow(f"{m}_feed_forward", (x, ys[2] + 0.2), (x, ys[3] - 0.2))
    c.arrow(f"{m}_feed_forward", (x, ys[3] + 0.2), (x, adds[1] - 0.16))
    c.arrow(f"{m}_residuals", (x, adds[1] + 0.16), (x, 6.55))


def attention_head_shapes(n_q: int = 4, n_k: int = 4, d_k: int = 3, d_v: int = 5, ax=None):
    """One head of attention as matrix products, each matrix drawn to the scale of its shape:
    Q (n_q × d_k) times Kᵀ (d_k × n_k) gives the scores (n_q × n_k); softmax row by row gives
    the weights A; A times V (n_k × d_v) gives the output (n_q × d_v)."""
    if ax is None:
        _, ax = plt.subplots(figsize=(11, 2.8))
    unit, x, base = 0.32, 0.0, 0.0

    def matrix(name, rows, cols, colour, shape):
        nonlocal x
        ax.add_patch(Rectangle((x, base), cols * unit, rows * unit, facecolor=colour, edgecolor="#444444"))
        for i in range(1, rows):
            ax.plot([x, x + cols * unit], [base + i * unit] * 2, color="#444444", linewidth=0.3)
        for j in range(1, cols):
            ax.plot([x + j * unit] * 2, [base, base + rows * unit], color="#444444", linewidth=0.3)
        ax.text(x + cols * unit / 2, base + rows * unit + 0.18, name, ha="center", fontsize=10)
        ax.text(x + cols * unit / 2, base - 0.25, shape, ha="center", va="top", fontsize=8.5)
        x += cols * unit

    def sign(text, width=0.7):
        nonlocal x
        ax.text(x + width / 2, base + 0.6, text, ha="center", va="center", fontsize=11)
        x += width

    matrix("Q", n_q, d_k, COLOURS["attention"], f"({n_q} × {d_k})\nn_q × d_k")
    sign("·")
    matrix("Kᵀ", d_k, n_k, COLOURS["attention"], f"({d_k} × {n_k})\nd_k × n_k")
    sign("/ √d_k\n=", 1.0)
    matrix("S", n_q, n_k, "#ffe3c2", f"({n_q} × {n_k})\nscores")
    sign("softmax\nrow by row\n→", 1.5)
    matrix("A", n_q, n_k, "#d7ecd2", f"({n_q} × {n_k})\nweights")
    sign("·")
    matrix("V", n_k, d_v, COLOURS["feed"], f"({n_k} × {d_v})\nn_k × d_v")
    sign("=")
    matrix("output", n_q, d_v, COLOURS["linear"], f"({n_q} × {d_v})\nn_q × d_v")
    ax.set_xlim(-0.2, x + 0.2)
    ax.set_ylim(-1.0, max(n_q, d_k, n_k) * unit + 0.6)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("One head of attention, as matrix products (every query row meets every key column)",
                 fontsize=10)
    ax.figure.tight_layout()
    return ax.figure
