"""Q in registers on kernel 30: S = Q K^T reads Q's A fragments from registers, K alone from shared memory."""

TITLE = "Q in registers on kernel 30"
ROWS = ("one query tile per work item",)
COLUMNS = ("Q read from shared memory by every S", "Q in registers")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k30_short_seam",
    (ROWS[0], COLUMNS[1]): "k30_q_in_registers",
}
CHANGED_LINES = 90  # the shared-memory wgmma gives way to one with A in registers and B K-major, two types each;
# Q's fragments loaded by ldmatrix, the scores' wgmma that reads them, and Q's buffer freed once they are loaded
