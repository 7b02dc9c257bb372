"""Q in registers on kernel 30, crossed with the first exponentials of each tile placed under P V by the source."""

TITLE = "Q in registers and the first exponentials under P V, on kernel 30"
ROWS = ("the exponentials where ptxas puts them", "the first 16 exponentials under P V")
COLUMNS = ("Q read from shared memory by every S", "Q in registers")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k30_short_seam",
    (ROWS[0], COLUMNS[1]): "k30_q_in_registers",
    (ROWS[1], COLUMNS[0]): "k30_early_exponentials",
    (ROWS[1], COLUMNS[1]): "k30_q_early_exponentials",
}
CHANGED_LINES = 113  # the shared-memory wgmma gives way to one with A in registers and B K-major, two types each;
# Q's fragments loaded by ldmatrix, the scores' wgmma that reads them, and Q's buffer freed once they are loaded;
# with the first exponentials under P V, a second lambda for them and the later ones starting past them
