"""Two ways to spend less on a tile, on kernel 29: O's rescale skipped where no max moved, and causal, the last key
tile half-wide where a warpgroup sees none of its second half."""

TITLE = "less work per tile on kernel 29: O's rescale where a max moved, a half-wide diagonal tile"
ROWS = ("one query tile per work item",)
COLUMNS = (
    "every tile whole, O rescaled every tile",
    "O rescaled only where a row's max moved (a warp vote)",
    "causal: the last key tile half-wide where a warpgroup sees none of its second half",
)
CELLS = {
    (ROWS[0], COLUMNS[0]): "k29_causal_interleave",
    (ROWS[0], COLUMNS[1]): "k29_lazy_rescale",
    (ROWS[0], COLUMNS[2]): "k29_half_tile",
}
CHANGED_LINES = 90  # the half-wide tile: the m64n64 wgmma's two wrappers, the tile loop as a step taken for each
# tile and for the last one apart, and the last P V's half
