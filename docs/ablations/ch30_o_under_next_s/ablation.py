"""O written out under the next query tile's first S, on kernel 30: that S issued right after the last P V."""

TITLE = "O written out under the next query tile's first S, on kernel 30"
ROWS = ("one query tile per work item",)
COLUMNS = ("O out, then the next first S", "the next first S, then O out under it")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k30_short_seam",
    (ROWS[0], COLUMNS[1]): "k30_o_under_next_s",
}
CHANGED_LINES = 64  # the next work item read at the seam and its first S issued there, a block's first S issued in
# its first query tile, S's accumulators kept by the caller across query tiles, and the wait for P V that lets S run
