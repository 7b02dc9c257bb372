"""The rest of the softmax on kernel 21: the first half's exponentials between the two waits, and P V in halves."""

TITLE = (
    "P V in one batch or in two halves, against the first half's exponentials after or before the wait, on kernel 21"
)
ROWS = ("P V in one batch, with the next S", "P V in halves, the first issued once its P is packed")
COLUMNS = ("the exponentials after the wait for P V", "the first half's exponentials between the waits")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_half_exponentials_first",
    (ROWS[1], COLUMNS[0]): "k21_split_products",
    (ROWS[1], COLUMNS[1]): "k21_split_half_first",
}
CHANGED_LINES = 110  # the halves: the exponentials, packing and products by half, the first half's own issue with
# the last tile's V zeroing moved into it; the exponentials' half above the fence
