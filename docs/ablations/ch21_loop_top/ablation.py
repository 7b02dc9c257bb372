"""The top of kernel 21's tile loop: its waits for K and V, and the arithmetic that finds their barriers."""

TITLE = "one wait or two before S, and stages from a signed or an unsigned count, on kernel 21"
ROWS = ("stages from a signed count", "stages from an unsigned count")
COLUMNS = ("K and V awaited before S", "V awaited once S is issued")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_v_after_s",
    (ROWS[1], COLUMNS[0]): "k21_unsigned_count",
    (ROWS[1], COLUMNS[1]): "k21_lean_top",
}
