"""One query tile starting the next, on kernel 29: its first S goes to the tensor cores with the last P V before it."""

TITLE = "One query tile starting the next, on kernel 29"
ROWS = ("one query tile per work item",)
COLUMNS = ("each query tile starts alone", "its first S with the last P V before it")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k29_causal_interleave",
    (ROWS[0], COLUMNS[1]): "k29_next_query_tile",
}
CHANGED_LINES = 224  # the successor fetched at a query tile's end, its first S and softmax beside the last P V,
# the state a query tile hands the next, the epilogue's sums taken first, and the counter asked a tile ahead
