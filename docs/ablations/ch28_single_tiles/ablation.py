"""Kernel 28's work list taken apart: pairs or single tiles, one unit's at a time or a few units' interleaved."""

TITLE = "pairs of query tiles or single tiles longest first, one unit's at a time or up to four units' interleaved"
ROWS = ("pairs: tile i from the end with tile i from the start", "single tiles, the longest first")
COLUMNS = ("one unit's at a time", "up to four units' interleaved, as many as L2 holds")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k27_tma_store",
    (ROWS[0], COLUMNS[1]): "k27_pairs_interleaved",
    (ROWS[1], COLUMNS[0]): "k28_one_head",
    (ROWS[1], COLUMNS[1]): "k28_single_tiles",
}
CHANGED_LINES = 25  # the interleaved work list on kernel 27: its two constants, its comment and its lookup
