"""FlashAttention-4's tile on kernel 21: a loop top with nothing to wait for, a steady path as short as its own, and
its turns on the tensor cores."""

TITLE = "kernel 21's tile, its top with nothing to wait for, and as short as FlashAttention-4's, with and without turns"
ROWS = ("the warpgroups issue when ready", "the warpgroups take turns, S once K has landed")
COLUMNS = ("kernel 21's tile", "nothing to wait for at the top", "and a tile as short as FlashAttention-4's")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_peeked",
    (ROWS[0], COLUMNS[2]): "k21_short_tile",
    (ROWS[1], COLUMNS[0]): "k21_ping_pong",  # ch21_clock_fence's
    (ROWS[1], COLUMNS[1]): "k21_peeked_turns",
    (ROWS[1], COLUMNS[2]): "k21_short_tile_turns",
}
CHANGED_LINES = 60  # the short tile with turns: the top, two trims and the turns, each a few lines
