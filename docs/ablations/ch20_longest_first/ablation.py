"""Kernel 20's work items taken apart: pairs of query tiles or single tiles, and which of a head's tiles come first."""

TITLE = "pairs of query tiles or one tile per work item, each head's longer or shorter tiles first, on kernel 20"
ROWS = ("pairs: tile i from the end with tile i from the start", "one query tile per work item")
COLUMNS = ("each head's longer tiles first", "each head's shorter tiles first")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k20_decode_kernel",
    (ROWS[0], COLUMNS[1]): "k20_shorter_first",
    (ROWS[1], COLUMNS[0]): "k20_longest_first",
    (ROWS[1], COLUMNS[1]): "k20_shortest_first",
}
CHANGED_LINES = 56  # the work list of single tiles, one ask of the counter per tile, and the slot that names one
