"""Chapter 20's decode kernel, taken apart: its copies addressed once per tile, and its merge without bank conflicts."""

TITLE = "the decode kernel's copies addressed once per tile against its merge without bank conflicts, on kernel 20"
ROWS = ("copies addressed row by row", "copies addressed once per tile")
COLUMNS = ("warps merge with bank conflicts", "warps merge without")
CELLS = {
    ("copies addressed row by row", "warps merge with bank conflicts"): "k20_first",
    ("copies addressed row by row", "warps merge without"): "k20_rowwise_copies",
    ("copies addressed once per tile", "warps merge with bank conflicts"): "k20_conflicted_merge",
    ("copies addressed once per tile", "warps merge without"): "k20_decode_kernel",
}
CHANGED_LINES = 100  # both first versions: the copy helper, and the merge from its stores to its writes of O
