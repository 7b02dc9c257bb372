"""O's rescale on kernel 29: every tile, or only the tiles where one of a warp's row maxima moved."""

TITLE = "O rescaled every tile or only where a max moved, on kernel 29"
ROWS = ("one query tile per work item",)
COLUMNS = ("O rescaled every tile", "O rescaled only where a row's max moved (a warp vote)")
CELLS = {
    (ROWS[0], COLUMNS[0]): "k29_causal_interleave",
    (ROWS[0], COLUMNS[1]): "k29_lazy_rescale",
}
