#!/usr/bin/env python3
"""Every relative link in README.md, CONTRIBUTING.md and docs/*.md resolves.

A link's file must exist, and its #anchor, if any, must name a heading of
the target Markdown page (GitHub's anchors: lower case, punctuation dropped,
spaces to hyphens, -1, -2... for repeats). Links inside fenced code blocks
and absolute URLs are not checked.

  tests/docs/links_test.py SOURCE_DIR
"""
import re
import sys
from pathlib import Path

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(path):
    """(line number, text) of the lines outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path):
    seen = {}
    for _, line in prose_lines(path):
        m = HEADING.match(line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(2).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        yield slug if count == 0 else f"{slug}-{count}"


def main():
    root = Path(sys.argv[1]).resolve()
    pages = [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]
    failures, checked = [], 0
    for page in pages:
        if not page.exists():
            continue
        for number, line in prose_lines(page):
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue  # http:, https:, mailto:
                checked += 1
                file_part, _, anchor = target.partition("#")
                dest = (page.parent / file_part).resolve() if file_part else page
                where = f"{page.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    failures.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in set(anchors(dest)):
                    failures.append(f"{where}: no heading #{anchor} in {dest.relative_to(root)}")
    for failure in failures:
        print("FAIL:", failure)
    if checked == 0:
        print("FAIL: no links found")
        return 1
    if not failures:
        print(f"ok: {checked} relative links resolve in {len(pages)} page(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
