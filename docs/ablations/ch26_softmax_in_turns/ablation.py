"""The whole softmax under P V on kernel 26, whose warpgroups take turns on the tensor cores."""

TITLE = "the exponentials after or between the waits, and O rescaled before P V, on kernel 26 (turns)"
ROWS = ("O rescaled after the wait for P V", "O rescaled before P V is issued, a tile late")
COLUMNS = ("the exponentials after the wait for P V", "the exponentials between the waits")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k26_turns",
    (ROWS[0], COLUMNS[1]): "k26_exponentials_first",
    (ROWS[1], COLUMNS[0]): "k26_rescale_late",
    (ROWS[1], COLUMNS[1]): "k26_softmax_first",
}
CHANGED_LINES = 32  # O's rescale as a helper called after issuing S, before P V, and before the last P V, a
# second fence before P V; the exponentials above the fence
