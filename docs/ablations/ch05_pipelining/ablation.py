"""Chapter 5 taken apart: the second K/V stage and the larger block, each on its own."""

TITLE = "pipelining against block size: one or two K/V stages, 64 query rows and 4 warps or 128 and 8"
ROWS = ("64 rows, 4 warps", "128 rows, 8 warps")
COLUMNS = ("one stage", "two stages")
CELLS = {
    ("64 rows, 4 warps", "one stage"): "k04_swizzle",
    ("64 rows, 4 warps", "two stages"): "k05_block64",
    ("128 rows, 8 warps", "one stage"): "k04_block128",
    ("128 rows, 8 warps", "two stages"): "k05_pipelining",
}
