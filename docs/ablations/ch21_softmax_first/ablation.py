"""The whole softmax under P V on kernel 21: the exponentials between the two waits, and O rescaled before P V."""

TITLE = "the exponentials after or between the waits, against O rescaled after the wait or before P V, on kernel 21"
ROWS = ("O rescaled after the wait for P V", "O rescaled before P V is issued, a tile late")
COLUMNS = ("the exponentials after the wait for P V", "the exponentials between the waits")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k21_maxima_first",
    (ROWS[0], COLUMNS[1]): "k21_exponentials_first",
    (ROWS[1], COLUMNS[0]): "k21_rescale_late",
    (ROWS[1], COLUMNS[1]): "k21_softmax_first",
}
CHANGED_LINES = 32  # O's rescale as a helper called after issuing S, before P V, and before the last P V, a
# second fence before P V; the exponentials above the fence
