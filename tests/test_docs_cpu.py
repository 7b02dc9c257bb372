"""The pages under docs/: links that resolve, the markers the results generator fills, and the thread maps the
figures draw (computed from the kernels' own formulas, so a wrong figure is a failing test)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md"))
CHAPTER_PAGES = {int(page.name[:2]): page for page in PAGES if re.match(r"\d\d_", page.name) and page.name[:2] != "00"}
# A chapter folder kNN_slug/ with a loader.py has its page docs/NN_slug.md; an ablation set docs/ablations/chNN_*/
# puts its grid on page NN.
CHAPTER_FOLDERS = sorted(folder for folder in ROOT.glob("k[0-9][0-9]_*") if (folder / "loader.py").exists())
ABLATION_PAGES = {
    int(folder.name[2:4]): f"ablation-{folder.name[:4]}"
    for folder in (DOCS / "ablations").glob("ch[0-9][0-9]_*")
    if (folder / "ablation.py").exists()
}

LINK = re.compile(r"\]\(([^)\s]+)\)")
MARKER = re.compile(r"<!-- results:([\w-]+):(start|end) -->")


def anchor(heading: str) -> str:
    """GitHub's anchor for a Markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor a page's headings define (outside code blocks)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_relative_links_and_anchors_resolve(page):
    """A reader who follows a link lands on a file that exists, at a heading that exists."""
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://")):
            continue
        path, _, fragment = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name} links to {target}, which does not exist"
        if fragment and linked.suffix == ".md":
            assert fragment in anchors(linked), f"{page.name} links to #{fragment}, not a heading of {linked.name}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_pages_speak_of_the_kernels_only(page):
    """A reader can rerun what a page cites: no one-off runs, scripts outside the repository or notes of who
    measured what."""
    found = re.findall(r"session|device call|\bcall \d|\blab\b|lab_sweeps", page.read_text(), flags=re.I)
    assert not found, f"{page.name}: {found}"


def test_every_figure_is_on_a_page():
    """make_figures.py draws nothing that no page shows."""
    shown = "".join(page.read_text() for page in PAGES)
    for figure in (DOCS / "figures").glob("*.png"):
        assert f"figures/{figure.name}" in shown, f"{figure.name} is on no page"


def marker_names(page: Path) -> list[str]:
    """The results blocks of a page, in order; each start must be closed by its end before the next opens."""
    names, open_name = [], None
    for name, side in MARKER.findall(page.read_text()):
        if side == "start":
            assert open_name is None, f"{page.name}: {name} starts inside {open_name}"
            open_name = name
        else:
            assert name == open_name, f"{page.name}: {name} ends without its start"
            names.append(name)
            open_name = None
    assert open_name is None, f"{page.name}: {open_name} never ends"
    return names


@pytest.mark.parametrize("folder", CHAPTER_FOLDERS, ids=[folder.name for folder in CHAPTER_FOLDERS])
def test_every_chapter_has_its_page(folder):
    """A chapter on the ladder is read on its page, named as make_results.py links it: docs/NN_slug.md."""
    page = DOCS / f"{folder.name[1:]}.md"
    assert page.exists(), f"{folder.name} has no page {page.relative_to(ROOT)}"


def test_every_ablation_set_has_a_chapter_page():
    """An ablation set's grid is shown on the page of the chapter it takes apart."""
    assert ABLATION_PAGES and set(ABLATION_PAGES) <= set(CHAPTER_PAGES)


FIRST_DECODE_CHAPTER = 17  # packed GQA: from here on a chapter's step is also measured at the decode shapes


@pytest.mark.parametrize("number", sorted(CHAPTER_PAGES))
def test_chapter_pages_hold_their_results_blocks(number):
    """Every chapter page after the first carries its step's table, the decode chapters (17 on) their step at the
    decode shapes too, and the page of each ablation set its grid, for make_results.py to fill."""
    expected = (
        ([ABLATION_PAGES[number]] if number in ABLATION_PAGES else [])
        + ([f"step-{number:02d}"] if number > 1 else [])
        + ([f"decode-{number:02d}"] if number >= FIRST_DECODE_CHAPTER else [])
    )
    assert sorted(marker_names(CHAPTER_PAGES[number])) == sorted(expected)


@pytest.mark.parametrize("number", sorted(CHAPTER_PAGES))
def test_an_outcome_follows_every_measured_block(number):
    """The sentence that reads a measured table is marked, so it can be found and rewritten from new numbers."""
    lines = [line for line in CHAPTER_PAGES[number].read_text().splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if MARKER.search(line) and line.endswith(":end -->"):
            assert lines[i + 1] == "<!-- outcome -->", f"page {number}: no outcome after {line}"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_placeholders_name_their_source(page):
    """A number to be filled names the chapter and the file it comes from: profile counts of chapters 2-4,
    ceilings from results/peak.json."""
    text = page.read_text()
    for chapter in re.findall(r"\[\[profile: (\w+),", text):
        assert chapter in {"2", "3", "4"}, f"{page.name}: no profile of chapter {chapter} is recorded"
        assert "results/profile_k02_to_k04.txt" in text, f"{page.name} does not cite the profile file"
    for key in re.findall(r"\[\[peak: ([^\]]+)\]\]", text):
        assert key.split(".")[0].split("[")[0] in {"ceilings", "details", "memory"}, f"{page.name}: {key}"
        assert "results/peak.json" in text, f"{page.name} does not cite results/peak.json"


def test_a_lane_holds_each_accumulator_element_once(figures):
    """The S and O maps of figures block_rows and kv128_scores: 32 lanes cover a warp's tile exactly."""
    for n_tiles in (8, 16):
        cells = [
            (row, col + i)
            for lane in range(32)
            for row, col in figures.accumulators.lane_pairs(lane, n_tiles)
            for i in range(2)
        ]
        assert sorted(cells) == [(row, col) for row in range(16) for col in range(8 * n_tiles)]


def test_block_address_is_one_xor_and_one_add_from_block_zero(figures):
    """Chapter 7's identity, for every lane and every (16, 16) block of a 64-row tile of kernel 4's layout."""
    for lane in range(32):
        at_zero = figures.swizzle.lane_block_address(lane, 0, 0)
        for row0 in range(0, 64, 16):
            for col0 in range(0, 128, 16):
                moved = (at_zero ^ 2 * col0) + 256 * row0
                assert figures.swizzle.lane_block_address(lane, row0, col0) == moved


BUILDING_BLOCKS = DOCS / "00_building_blocks.md"
GLOSSARY = DOCS / "glossary.md"
# The terms the chapters lean on before (or without) defining them: each must have an entry in the glossary.
GLOSSARY_TERMS = {
    "cp.async group": "cpasync-group",
    "gsb0": "gsb0",
    "ldmatrix": "ldmatrix",
    "log-sum-exp": "log-sum-exp",
    "mbarrier": "mbarrier",
    "never-executed pads": "never-executed-pads",
    "online softmax": "online-softmax",
    "persistent grid": "persistent-grid",
    "phase": "phase-and-parity",
    "proxy fence": "proxy-fence",
    "setmaxnreg": "setmaxnreg",
    "swizzle": "swizzle",
    "tensor map": "tensor-map",
    "uniform registers": "uniform-registers",
    "warpgroup": "warpgroup",
    "wgmma descriptor": "wgmma-descriptor",
}
# (page, term, anchor): a page that uses a term before the chapter that explains it links its first use.
FIRST_USES = [
    (3, "never-executed pads", "never-executed-pads"),
    (8, "warpgroup", "warpgroup"),
    (9, "gsb0", "gsb0"),
    (9, "uniform registers", "uniform-registers"),
    (10, "gsb0", "gsb0"),
    (11, "uniform registers", "uniform-registers"),
    (12, "uniform registers", "uniform-registers"),
    (12, "persistent grid", "persistent-grid"),
    (14, "gsb0", "gsb0"),
]


def glossary_entries() -> dict[str, str]:
    """The glossary (docs/glossary.md, linked from page 0): each entry's anchor and the text under its heading."""
    glossary = GLOSSARY.read_text()
    assert "(glossary.md)" in BUILDING_BLOCKS.read_text(), "page 0 does not point to the glossary"
    entries = {}
    for block in re.split(r"^### ", glossary, flags=re.M)[1:]:
        heading, _, body = block.partition("\n")
        entries[anchor(heading)] = body.strip()
    return entries


def prose(page: Path) -> str:
    """A page without its fenced code and with its headings blanked, so a term's first use is one in the text."""
    text = re.sub(r"```.*?```", lambda m: " " * len(m.group(0)), page.read_text(), flags=re.S)
    return re.sub(r"^#.*$", lambda m: " " * len(m.group(0)), text, flags=re.M)


def test_glossary_has_an_entry_per_term():
    """Every term the chapters lean on has its own heading in the glossary, with a definition of one to three
    sentences under it."""
    entries = glossary_entries()
    for term, term_anchor in GLOSSARY_TERMS.items():
        assert term_anchor in entries, f"the glossary has no entry for {term!r} (#{term_anchor})"
    for entry_anchor, body in entries.items():
        sentences = len(re.findall(r"[.!?]\)?(?:\s|$)", body))
        assert 1 <= sentences <= 3, f"glossary entry #{entry_anchor} has {sentences} sentences"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_glossary_links_land_on_entries(page):
    """A link into the glossary lands on one of its entries."""
    entries = glossary_entries()
    for target in LINK.findall(page.read_text()):
        path, _, fragment = target.partition("#")
        into_glossary = (page.parent / path).resolve() == GLOSSARY if path else page == GLOSSARY
        if into_glossary and fragment:
            assert fragment in entries, f"{page.name} links to #{fragment}, which the glossary does not define"


@pytest.mark.parametrize(("number", "term", "term_anchor"), FIRST_USES)
def test_first_use_links_to_the_glossary(number, term, term_anchor):
    """The first time a page says a term it has not explained yet, the words are a link to the glossary entry."""
    text = prose(CHAPTER_PAGES[number])
    first = re.search(r"\s+".join(map(re.escape, term.split())), text, flags=re.I)
    assert first, f"page {number} never says {term!r}"
    link = re.compile(r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(glossary\.md#" + re.escape(term_anchor) + r"\)")
    assert any(m.start() < first.start() < m.end() for m in link.finditer(text)), (
        f"page {number}: the first {term!r} is not a link to #{term_anchor}"
    )
