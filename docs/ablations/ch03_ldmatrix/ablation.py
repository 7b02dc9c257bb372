"""Chapter 3 taken apart: ldmatrix against per-lane fragment loads, on rows with and without bank conflicts."""

TITLE = "ldmatrix against per-lane fragment loads, on conflicting, padded and swizzled shared-memory rows"
ROWS = ("per-lane loads", "ldmatrix")
COLUMNS = ("256-byte rows", "272-byte rows (padded)", "swizzled rows")
CELLS = {
    ("per-lane loads", "256-byte rows"): "k02_cp_async",
    ("per-lane loads", "272-byte rows (padded)"): "k02_padded",
    ("per-lane loads", "swizzled rows"): "k02_swizzled",
    ("ldmatrix", "256-byte rows"): "k03_ldmatrix",
    ("ldmatrix", "272-byte rows (padded)"): "k03_padded",
    ("ldmatrix", "swizzled rows"): "k04_swizzle",
}
