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
# The chapter that adds a decode kernel prefills with the chapter before it's kernel, instruction for instruction
# (tests/test_hopper_cpu.py compares their SASS): its step is at the decode shapes alone.
PREFILL_AS_BEFORE = 20


@pytest.mark.parametrize("number", sorted(CHAPTER_PAGES))
def test_chapter_pages_hold_their_results_blocks(number):
    """Every chapter page after the first carries its step's table (from the ladder's runs, or from a run of its own
    that holds the headline shape: a `runs-NAME` block), the decode chapters (17 on) their step at the decode shapes
    too, and the page of each ablation set its grid, and any stamped tile loop a page reads, for make_results.py to
    fill."""
    names = marker_names(CHAPTER_PAGES[number])
    own_runs = [name for name in names if name.startswith("runs-")]
    expected = (own_runs or [f"step-{number:02d}"] if 1 < number != PREFILL_AS_BEFORE else []) + (
        [f"decode-{number:02d}"] if number >= FIRST_DECODE_CHAPTER else []
    )
    # An ablation grid, with its steps or without, of the set's file and of its other shapes (ablation_ch19_causal);
    # and a stamped tile loop the page reads (timeline-NAME).
    grids = [name for name in names if name.startswith("ablation-")]
    timelines = [name for name in names if name.startswith("timeline-")]
    assert sorted(set(names) - set(grids) - set(timelines)) == sorted(expected) and len(names) == len(set(names))
    if number in ABLATION_PAGES:
        base = ABLATION_PAGES[number].removeprefix("ablation-")
        assert {re.sub(r"^ablation-(steps-)?", "", name) for name in grids} & {base}, grids
        assert all(re.fullmatch(rf"ablation-(steps-)?{base}(_\w+)?", name) for name in grids), grids
    else:
        assert not grids


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


# --- budgets, provenance and numbers ------------------------------------------------------------------------------

BUDGETS = {"00_building_blocks.md": 3_500}  # page 0; every other page written by hand: CHAPTER_BUDGET words
CHAPTER_BUDGET = 2_000
GENERATED = {"results.md"}  # written by make_results.py from results/, as long as the files are
HAND_WRITTEN = [page for page in PAGES if page.name not in GENERATED]


@pytest.mark.parametrize("page", HAND_WRITTEN, ids=[p.name for p in HAND_WRITTEN])
def test_pages_keep_to_their_word_budget(page):
    """A chapter page is short enough to read beside its diff (as `wc -w` counts words): page 0 at most 3,500,
    every other page at most 2,000."""
    words = len(page.read_text().split())
    budget = BUDGETS.get(page.name, CHAPTER_BUDGET)
    assert words <= budget, f"{page.name} has {words} words, over its budget of {budget}"


# A hexadecimal word of 7 to 40 characters with a digit and a letter in it: a commit's hash. Provenance (command,
# source hash, date) lives in the result files, not in the prose.
COMMIT_HASH = re.compile(r"(?<![.\w])(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
PROVENANCE = re.compile(
    r"\b(?:at commit|an? (?:earlier|previous|older|former) (?:run|session|version)|previous(?:ly)? (?:run|session|"
    r"recorded)|earlier (?:run|session)s?|at the time of writing|in our measurements)\b",
    flags=re.I,
)


def without_code(text: str) -> str:
    """A page's prose: fenced code blocks and inline code blanked (an opcode or a constant is not a claim)."""
    text = re.sub(r"```.*?```", " ", text, flags=re.S)
    return re.sub(r"`[^`\n]*`", " ", text)


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=["README.md", *(p.name for p in PAGES)])
def test_pages_carry_no_commit_hashes_or_run_history(page):
    """A page says what the kernels do and cites the file that measured it; which commit or run a number came from
    is recorded in that file, not told in the prose."""
    text = page.read_text()
    assert not COMMIT_HASH.findall(text), f"{page.name}: commit hashes {COMMIT_HASH.findall(text)}"
    assert not PROVENANCE.findall(without_code(text)), f"{page.name}: {PROVENANCE.findall(without_code(text))}"


def problem_section(page: Path) -> str:
    """The first paragraph of a chapter page's "The problem" section."""
    text = page.read_text()
    match = re.search(r"^## The problem\n+(.*?)(?:\n\n|\Z)", text, flags=re.M | re.S)
    assert match, f"{page.name} has no '## The problem' section"
    return match.group(1)


@pytest.mark.parametrize("number", sorted(CHAPTER_PAGES))
def test_the_problem_opens_with_its_measured_number(number):
    """A chapter's problem is stated first as a measurement: a TFLOP/s, a time, a percentage or a count from a
    results file, in the first paragraph of its "The problem" section."""
    opening = problem_section(CHAPTER_PAGES[number])
    measured = re.compile(r"\d[\d,.]*\s*(?:TFLOP/s|ms|%|×|GB|TB/s|cycles|instructions|registers|wavefronts|-way)")
    assert measured.search(opening), f"page {number}'s problem opens without a measured number: {opening!r}"


# A decimal number with a fractional part, and its exponent if it has one: 545.5, 0.89, 2.3e-3.
DECIMAL = re.compile(r"(?<![\w.,\-])(\d{1,3}(?:,\d{3})+\.\d+|\d+\.\d+(?:[eE][-+]?\d+)?)(?![\w.]*\d)")
# A number right after "=" or "≈" is the result of the arithmetic the page shows before it (2 · 64 · 4096 · 128 =
# 67.1 M): the page derives it, and may quote it again.
DERIVED = re.compile(r"[=≈]\s*\**\s*(\d{1,3}(?:,\d{3})+\.\d+|\d+\.\d+(?:[eE][-+]?\d+)?)")
# A number as a results file writes it: 7,530,924,131, 545.53, 2.3e-03 or 128.
RECORDED_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+\.\d+(?:[eE][-+]?\d+)?|\d+")
GENERATED_BLOCK = re.compile(r"<!-- (results:[\w-]+|ladder|chapters):start -->.*?<!-- \1:end -->", flags=re.S)
# Numbers a page quotes that no results file holds, each with why: keep it short, and prefer quoting the file.
UNRECORDED: dict[str, dict[str, str]] = {}
NUMBERED_PAGES = [ROOT / "README.md", *HAND_WRITTEN]


def results_module():
    """docs/make_results.py, imported from its path: the one way the pages' tables are made from results/."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_results", DOCS / "make_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def recorded_numbers() -> list[float]:
    """Every number in results/ (a run's per-repeat samples aside: a page quotes their medians) and every number
    make_results.py renders from them, sorted."""
    import json

    def without_samples(data):
        if isinstance(data, dict):
            return {key: without_samples(value) for key, value in data.items() if key != "samples_ms"}
        return [without_samples(value) for value in data] if isinstance(data, list) else data

    texts = [results_module().results_page(ROOT / "results")]
    for path in (ROOT / "results").iterdir():
        text = path.read_text()
        texts.append(json.dumps(without_samples(json.loads(text))) if path.suffix == ".json" else text)
    numbers = [float(x.replace(",", "")) for text in texts for x in RECORDED_NUMBER.findall(text)]
    # A page may quote a large count in thousands, millions or billions: 7,530,924,131 as 7.53 G.
    return sorted(numbers + [x / scale for x in numbers if x >= 1_000 for scale in (1e3, 1e6, 1e9)])


def quoted_numbers(page: Path) -> list[str]:
    """The decimal numbers of a page's prose and tables: code, generated blocks, comments and link targets aside."""
    text = GENERATED_BLOCK.sub(" ", page.read_text())
    text = re.sub(r"<!--.*?-->", " ", without_code(text), flags=re.S)
    return DECIMAL.findall(re.sub(r"\]\([^)]*\)", "]", text))


def rounds_to(quoted: str, recorded: list[float]) -> bool:
    """Whether some recorded number rounds to the quoted one at the digits it is quoted with (545.53 → 545.5)."""
    import bisect

    quoted = quoted.replace(",", "")
    mantissa, _, exponent = quoted.lower().partition("e")
    tolerance = 0.5 * 10.0 ** (int(exponent or 0) - len(mantissa.split(".")[1])) * (1 + 1e-9)
    i = bisect.bisect_left(recorded, float(quoted) - tolerance)
    return i < len(recorded) and recorded[i] <= float(quoted) + tolerance


@pytest.fixture(scope="module")
def recorded():
    return recorded_numbers()


def test_the_generated_tables_are_todays(tmp_path):
    """docs/results.md is exactly what make_results.py renders from results/ now: each of its numbers is recorded."""
    assert (DOCS / "results.md").read_text() == results_module().results_page(ROOT / "results"), (
        "docs/results.md is out of date: run python docs/make_results.py"
    )


@pytest.mark.parametrize("page", NUMBERED_PAGES, ids=[p.name for p in NUMBERED_PAGES])
def test_every_quoted_decimal_is_recorded(page, recorded):
    """A number with a fractional part that a page quotes is in a file under results/ (or rendered from one), up to
    the rounding the page quotes it with, or derived on the page with its arithmetic shown."""
    text = page.read_text()
    derived = [float(x.replace(",", "")) for x in DERIVED.findall(without_code(text))]
    allowed = UNRECORDED.get(page.name, {})
    missing = [
        x
        for x in quoted_numbers(page)
        if x not in allowed and not rounds_to(x, recorded) and float(x.replace(",", "")) not in derived
    ]
    assert not missing, f"{page.name} quotes numbers no results file holds: {missing}"


def test_an_unrecorded_number_is_on_its_page():
    """The allow-list names only numbers its page still quotes, each with a reason."""
    for name, numbers in UNRECORDED.items():
        quoted = quoted_numbers(ROOT / name if name == "README.md" else DOCS / name)
        for number, reason in numbers.items():
            assert number in quoted and reason, f"{name}: {number} is allowed but not quoted"


def test_rounding_is_to_the_digits_quoted():
    """545.53 may be quoted as 545.5, not as 545.6; 2.31e-3 as 2.3e-3."""
    assert rounds_to("545.5", [545.53]) and not rounds_to("545.6", [545.53])
    assert rounds_to("2.3e-3", [0.00231]) and not rounds_to("2.4e-3", [0.00231])
    assert rounds_to("1,407.6", [1407.58]) and DECIMAL.findall("1,407.6 million") == ["1,407.6"]


def test_the_readme_gives_one_value_per_chapter_at_the_headline_shape():
    """The README's ladder is results/headline.json; a chapter's TFLOP/s at the same shape measured in another run
    (a run of chapters 14-16 alone, the FlashAttention-4 comparison) is not quoted beside it as a second value."""
    from kernels.tools.runs import load_runs

    headline = load_runs(ROOT / "results" / "headline.json")[0]
    ladder = {row.name: f"{row.tflops:.1f}" for row in headline.rows if row.kind == "chapter"}
    prose = quoted_numbers(ROOT / "README.md")
    runs = []
    for path in sorted((ROOT / "results").glob("*.json")):
        if path.name == "headline.json" or "profiles" in path.read_text()[:200]:
            continue
        try:
            runs += [(path, run) for run in load_runs(path)]
        except ValueError:
            continue  # not a ladder run (results/peak.json)
    # The same value may be the chapter's at another shape, which the README quotes as such.
    elsewhere = {(row.name, f"{row.tflops:.1f}") for _, run in runs if run.shape != headline.shape for row in run.rows}
    for path, run in runs:
        if run.shape != headline.shape:
            continue
        for row in run.rows:
            other = f"{row.tflops:.1f}"
            if row.name in ladder and other != ladder[row.name] and (row.name, other) not in elsewhere:
                why = f"README quotes {row.name} at {other} ({path.name}), not {ladder[row.name]}"
                assert other not in prose, why
