"""What the host does to a feedback page before it goes into OUT: readable offline, and
the late penalty said.

nbconvert's page loads MathJax from a CDN to typeset the notebook's formulas; offline (a
page mailed, opened on a train, or from an LMS that strips scripts) they stay raw TeX. The
page here carries no script at all: each formula is written out as text, with Unicode for
the symbols the course's notebooks use (``\\sqrt{d_k}`` -> √d<sub>k</sub>, ``\\mathbb{R}``
-> ℝ, ``W^\\top`` -> Wᵀ) and HTML sub- and superscripts. A formula the conversion does not
know a command of keeps that command's name as text, so nothing is lost.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

from grader.results import Result, number

MATHJAX = re.compile(r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.S)
#: Parts of a page where a dollar sign is not math: code, scripts, styles.
VERBATIM = re.compile(r"(<pre\b.*?</pre>|<code\b.*?</code>|<script\b.*?</script>|<style\b.*?</style>)", re.S)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?!\s)([^$\n]+?)(?<!\s)\$", re.S)
SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ϵ", "varepsilon": "ε",
    "eta": "η", "theta": "θ", "lambda": "λ", "mu": "μ", "pi": "π", "sigma": "σ", "tau": "τ",
    "phi": "φ", "omega": "ω", "Phi": "Φ", "Sigma": "Σ", "Omega": "Ω", "ell": "ℓ",
    "cdot": "·", "times": "×", "in": "∈", "approx": "≈", "infty": "∞", "leftarrow": "←",
    "rightarrow": "→", "to": "→", "ldots": "…", "dots": "…", "cdots": "⋯", "odot": "⊙",
    "pm": "±", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥", "neq": "≠", "mid": "|", "sum": "Σ",
    "prod": "Π", "top": "ᵀ", "qquad": "\u2003\u2003", "quad": "\u2003", ",": "\u2009",
    "log": "log", "sin": "sin", "cos": "cos", "exp": "exp", "max": "max", "min": "min",
    "big": "", "Big": "", "left": "", "right": "", "!": "", ";": " ", "{": "{", "}": "}",
}
DOUBLE_STRUCK = {"R": "ℝ", "N": "ℕ", "Z": "ℤ", "E": "𝔼", "Q": "ℚ", "C": "ℂ"}
GROUP = r"\{((?:[^{}]|\{[^{}]*\})*)\}"  # one brace group (one level of nesting inside)


def tex_to_html(tex: str) -> str:
    """A formula as HTML text (see the module docstring)."""
    text = html.unescape(tex)
    text = re.sub(r"\\begin\{[a-z*]+\}|\\end\{[a-z*]+\}", "", text)
    text = text.replace("\\\\", "; ").replace("&", " ")
    text = re.sub(r"\\underbrace" + GROUP + r"_" + GROUP, r"\1", text)
    text = re.sub(r"\\mathbb\{(\w)\}", lambda m: DOUBLE_STRUCK.get(m[1], m[1]), text)
    for _ in range(3):  # nested commands, innermost first
        text = re.sub(r"\\(?:mathrm|text|operatorname|mathcal|mathbf|boldsymbol)" + GROUP, r"\1", text)
        text = re.sub(r"\\d?frac" + GROUP + GROUP, lambda m: f"{wrap(m[1])}/{wrap(m[2])}", text)
        text = re.sub(r"\\sqrt" + GROUP, lambda m: "√" + wrap(m[1]), text)
    text = re.sub(r"\\([A-Za-z]+|[,;!{}])", lambda m: SYMBOLS.get(m[1], m[1]), text)
    out = html.escape(text, quote=False)
    for _ in range(2):
        out = re.sub(r"\^ᵀ|\^\{ᵀ\}", "ᵀ", out)
        out = re.sub(r"_" + GROUP, r"<sub>\1</sub>", out)
        out = re.sub(r"\^" + GROUP, r"<sup>\1</sup>", out)
        out = re.sub(r"_([^\s{}<])", r"<sub>\1</sub>", out)
        out = re.sub(r"\^([^\s{}<])", r"<sup>\1</sup>", out)
    return out.replace("{", "").replace("}", "")


def wrap(part: str) -> str:
    """``part`` in parentheses unless it is one symbol."""
    return part if len(part.strip()) <= 1 or re.fullmatch(r"[\w]+", part.strip()) else f"({part})"


def render_math(segment: str) -> str:
    def one(match: re.Match) -> str:
        if match[1] is not None:
            return f'<div class="math display">{tex_to_html(match[1])}</div>'
        return f'<span class="math">{tex_to_html(match[2])}</span>'

    return MATH.sub(one, segment)


MATH_STYLE = ("<style>.math{font-family:'STIX Two Math','Cambria Math','Latin Modern Math',serif;"
              "font-style:italic;white-space:nowrap}.math.display{display:block;text-align:center;"
              "margin:0.6em 0}</style>")


def offline(page: str) -> str:
    """The page without MathJax's CDN script, its formulas written out (module docstring)."""
    page = MATHJAX.sub(MATH_STYLE, page)
    parts = VERBATIM.split(page)
    return "".join(part if i % 2 else render_math(part) for i, part in enumerate(parts))


def late_note(result: Result) -> str:
    """One line for the top of the page when the late policy took points."""
    if result.late_penalty <= 0:
        return ""
    return ('<div class="course-grader-late" style="border:2px solid #8a6d00;background:#fff8e1;'
            'padding:0.6em 1em;margin:1em 0">'
            f"<strong>Late penalty:</strong> {result.lateness}; "
            f"{number(result.late_penalty)} point(s) taken. Score: "
            f"{number(result.final_score)} / {number(result.max_score)} "
            f"(before the penalty {number(result.score)}).</div>")


#: What a host path becomes on a feedback page.
HOST = "[grading host]"
#: Folders every machine has: not the instructor's, left as they are.
COMMON = {"/", "/usr", "/usr/local", "/opt", "/tmp", "/home", "/srv"}


def host_paths(out: Path) -> list[str]:
    """The grading host's own folders a learner's output can print into her page (``PATH``,
    ``PYTHONPATH``, ``sys.prefix``, a traceback's file names): OUT, the course checkout, the
    grader's Python and home. Longest first, so the most specific is replaced whole."""
    from grader.errors import GraderError
    from grader.paths import course_root, import_roots

    found = {str(out), sys.prefix, sys.exec_prefix, str(Path(sys.executable).parent), *import_roots(),
             str(Path.home())}
    try:
        found.add(str(course_root()))
    except GraderError:
        pass
    found |= {str(Path(p).resolve()) for p in found}
    return sorted((p for p in found if p not in COMMON), key=len, reverse=True)


def scrub(page: str, paths: list[str]) -> str:
    """``page`` with every one of ``paths`` written :data:`HOST`."""
    for path in paths:
        page = page.replace(path, HOST)
    return page


def finish_page(page: str, result: Result, private: list[str] = ()) -> str:
    """The feedback page as it goes into OUT, the host's ``private`` paths scrubbed."""
    from grader.autograde.worker.feedback_note import add_note

    return add_note(scrub(offline(page), list(private)), late_note(result))
