"""The producer's copying warp beside kernel 21's consumers: which sub-partition it runs on, and how it waits."""

TITLE = "the producer's thread in warp 8 or 9, its waits retrying or sleeping until the phase, on kernel 21"
ROWS = ("the producer in warp 8, beside each warpgroup's warp 0", "the producer in warp 9, beside warp 1")
COLUMNS = ("waits that retry after the system's time", "waits with a suspend-time hint")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_suspend_hint",
    (ROWS[1], COLUMNS[0]): "k21_producer_warp9",
    (ROWS[1], COLUMNS[1]): "k21_warp9_suspend_hint",
}
