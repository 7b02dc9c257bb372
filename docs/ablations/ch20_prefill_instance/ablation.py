"""What chapters 17 and 18's generality costs chapter 20 at a plain prefill call: each compiled in as a constant."""

TITLE = (
    "kernel 20 with the heads per tile, and the splits, lengths and log-sum-exp, compiled in for a plain prefill call"
)
ROWS = ("splits, KV lengths and log-sum-exp at run time", "one split, full lengths, no log-sum-exp compiled in")
COLUMNS = ("heads per tile at run time", "one head per tile compiled in")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k20_decode_kernel",
    (ROWS[0], COLUMNS[1]): "k20_one_head",
    (ROWS[1], COLUMNS[0]): "k20_no_splits",
    (ROWS[1], COLUMNS[1]): "k20_prefill_only",
}
CHANGED_LINES = 12  # the call's values as constants, one head per tile, and the softmax without its guard
