"""The SASS tables of the chapter pages against today's build: every row of a page's table whose label is one of
`runner.py inspect`'s rows (registers / thread, HGMMA, integer ALU, total, ...) must hold the counts `inspect`
prints for the chapters in its columns (bf16, non-causal, sm_90). Another NVRTC emits other SASS, and then this
fails until the pages say what the new build shows."""

import re
from pathlib import Path

import pytest

from kernels.tools import inspection
from tests.helpers import CHAPTERS, ROOT

PAGES = sorted((ROOT / "docs").glob("[0-9][0-9]_*.md"))
CHAPTER_COLUMN = re.compile(r"k(\d\d)")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
INSPECT_ROWS = {*inspection.RESOURCE_ROWS, *inspection.SASS_ROWS, inspection.TOTAL}
BY_NUMBER = {chapter.number: chapter for chapter in CHAPTERS}


def sass_section(text: str) -> str:
    """The page's "What the SASS shows" section (its other tables, e.g. a profile's executed counts, are not
    the build's)."""
    _, found, rest = text.partition("\n## What the SASS shows\n")
    return rest.split("\n## ", 1)[0] if found else ""


def cells(line: str) -> list[str]:
    return [LINK.sub(r"\1", cell).replace("`", "").strip() for cell in line.strip().strip("|").split("|")]


def sass_table_rows(text: str) -> list[tuple[str, int, int]]:
    """(inspect row, chapter, count) for every cell of a table with chapter columns (| | k13 | k14 | ...) whose
    row label is inspect's; a label "A / B" with cells "1 / 2" counts as two rows. Other rows are left out."""
    found, columns = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            columns = None
            continue
        row = cells(line)
        if columns is None:
            columns = {i: int(m.group(1)) for i, cell in enumerate(row) if (m := CHAPTER_COLUMN.fullmatch(cell))}
            continue
        labels = [label.strip() for label in row[0].split(" / ")]
        if not columns or not all(label in INSPECT_ROWS for label in labels):
            continue
        for i, chapter in columns.items():
            values = [value.strip().replace(",", "") for value in row[i].split(" / ")]
            assert len(values) == len(labels) and all(v.isdigit() for v in values), (line, row[i])
            found += [(label, chapter, int(value)) for label, value in zip(labels, values, strict=True)]
    return found


def test_the_parser_reads_labels_links_and_pairs():
    text = "| [SASS](g.md) | k03 | k04 | |\n| --- | --- | --- | --- |\n"
    text += "| [`HMMA`](g.md#x) / `LDSM` | 128 / 40 | 1,024 / 0 | |\n| `LOP3.LUT` | 1 | 2 | not a row of inspect |\n"
    text += "\n| integer ALU | 5 | 6 | no header: not a table with chapters |\n"
    assert sass_table_rows(text) == [("HMMA", 3, 128), ("LDSM", 3, 40), ("HMMA", 4, 1024), ("LDSM", 4, 0)]
    assert sass_section("## A\n" + text + "## What the SASS shows\n" + text + "## B\n" + text) == text[:-1]


def page_rows(page: Path) -> list[tuple[str, int, int]]:
    return sass_table_rows(sass_section(page.read_text()))


@pytest.mark.parametrize("page", [page for page in PAGES if page_rows(page)], ids=lambda page: page.stem)
def test_sass_tables_match_todays_build(page):
    rows = page_rows(page)
    built = {number: inspection.inspect_chapter(BY_NUMBER[number], "sm_90").rows for _, number, _ in rows}
    wrong = [f"{label} k{number:02d}: page {count}, build {built[number][label]}" for label, number, count in rows
             if built[number][label] != count]  # fmt: skip
    assert not wrong, f"{page.name} (bf16, non-causal, sm_90): " + "; ".join(wrong)


def test_the_chapter_pages_with_sass_tables_are_checked():
    """Pages 2 to 15 compare two chapters in a table (page 1 counts one kernel's opcodes in full, page 16 in prose);
    a page whose table the parser stops reading would drop out of the test above without failing it."""
    checked = {page.stem[:2]: len(page_rows(page)) for page in PAGES if page_rows(page)}
    assert list(checked) == [f"{n:02d}" for n in range(2, 16)], checked
    assert all(n >= 4 for n in checked.values()), checked
