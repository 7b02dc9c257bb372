"""The last wave of a full-attention run on kernel 29: whole query tiles, or split along their keys."""

TITLE = "the last wave's query tiles whole or split along their keys, on kernel 29"
ROWS = ("one query tile per work item",)
COLUMNS = ("the last wave's tiles whole", "the last wave's tiles split along their keys, merged in the kernel")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k29_causal_interleave",
    (ROWS[0], COLUMNS[1]): "k29_tail_split",
}
CHANGED_LINES = 145  # the work list's tail, TailPiece, TailScratch, merge_pieces and the barrier that finds the last
# piece, the row sums' reduction moved ahead of it, and the tail's four kernel arguments
