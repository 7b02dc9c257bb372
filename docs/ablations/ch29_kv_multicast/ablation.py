"""K and V copied once for two blocks, on kernel 29: over long keys, the blocks of a cluster share each tile."""

TITLE = "K and V shared by a cluster's two blocks over long keys, on kernel 29"
ROWS = ("one query tile per work item",)
COLUMNS = ("each block copies its own K and V", "over long keys, a cluster's two blocks share K and V (TMA multicast)")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k29_causal_interleave",
    (ROWS[0], COLUMNS[1]): "k29_kv_multicast",
}
CHANGED_LINES = 135  # the multicast copy, the remote arrival, the cluster's rank and barriers, the pairs' work list
# and barrier counts, the descriptor's start field, and the consumers' work compiled paired and alone
