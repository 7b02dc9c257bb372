"""The fence that holds the maxima between the two waits on kernel 21: a memory fence or a read of the SM clock."""

TITLE = "a memory fence or a clock read holding the maxima above the wait for P V, with or without turns, on kernel 21"
ROWS = ("a memory fence (fence.acq_rel.cta)", "a read of the SM clock")
COLUMNS = ("the warpgroups issue when ready", "the warpgroups take turns, S first")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_ping_pong",
    (ROWS[1], COLUMNS[0]): "k21_clock_fence",
    (ROWS[1], COLUMNS[1]): "k21_clock_ping_pong",
}
CHANGED_LINES = 40  # the turns: two barriers, their first and last turns, one around each issue, V's wait between
# the products; the clock read: the fence's body
