"""The process side's size as issue 25 counts it (docs/architecture.md, "The process side's size").

    python benchmarks/process_side_size.py [FILE ...]

Default files: src/codist/launching/*.py and src/codist/{cli,exits,owner,rank_env}.py (the modules
that check, start, supervise and own a run's processes, and the base modules they share with the
ranks). Per file and in total: lines (`wc -l`: docstrings, comments and blank lines included) and
code lines (lines holding a token other than a comment, a docstring or a line break, found with
Python's tokenizer).
"""
from __future__ import annotations

import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SKIP = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER}


def default_files() -> list[Path]:
    src = ROOT / "src" / "codist"
    return sorted((src / "launching").glob("*.py")) + [src / f"{m}.py" for m in ("cli", "exits", "owner", "rank_env")]


def code_lines(text: str) -> int:
    """Lines with code: a string standing alone as a statement (a docstring) does not count."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    lines, before = set(), None   # `before`: the last token that is not a comment, blank or indent
    for i, tok in enumerate(tokens):
        if tok.type in SKIP:
            if tok.type == tokenize.NEWLINE:
                before = tok
            continue
        alone = (tok.type == tokenize.STRING and (before is None or before.type == tokenize.NEWLINE
                                                   or before.string == ":")
                 and tokens[i + 1].type in (tokenize.NEWLINE, tokenize.ENDMARKER))
        if not alone:
            lines.update(range(tok.start[0], tok.end[0] + 1))
        before = tok
    return len(lines)


def main(argv: list[str]) -> int:
    files = [Path(a) for a in argv] or default_files()
    total = code_total = 0
    for path in files:
        text = path.read_text()
        n, code = len(text.splitlines()), code_lines(text)
        total, code_total = total + n, code_total + code
        print(f"{n:6d} {code:6d}  {path.relative_to(ROOT) if path.is_absolute() else path}")
    print(f"{total:6d} {code_total:6d}  total (lines, code lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
