"""FlashAttention-4's order on kernel 20, taken apart: the warpgroups' turns, and the row maxima between the waits."""

TITLE = "the warpgroups' turns on the tensor cores against each row's max between the two waits, on kernel 20"
ROWS = ("the warpgroups issue when ready", "the warpgroups take turns, S first")
COLUMNS = ("the softmax after the wait for P V", "the row maxima between the waits")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k20_decode_kernel",
    (ROWS[0], COLUMNS[1]): "k20_maxima_first",
    (ROWS[1], COLUMNS[0]): "k20_ping_pong",
    (ROWS[1], COLUMNS[1]): "k20_maxima_ping_pong",
}
CHANGED_LINES = 70  # the turns: two barriers, their first and last turns, one around each issue; the maxima: the
# softmax in two steps, the fence between them
