"""Chapter 16 taken apart: the softmax chains with and without chapter 15's persistent grid."""

TITLE = "the grid against the softmax: a block per query tile or a persistent grid, one chain or eight"
ROWS = ("a block per query tile (kernel 14)", "persistent grid, tiles in pairs (kernel 15)")
COLUMNS = ("one chain per reduction", "eight chains")
CELLS = {
    ("a block per query tile (kernel 14)", "one chain per reduction"): "k14_overlap",
    ("a block per query tile (kernel 14)", "eight chains"): "k14_softmax_chains",
    ("persistent grid, tiles in pairs (kernel 15)", "one chain per reduction"): "k15_persistent",
    ("persistent grid, tiles in pairs (kernel 15)", "eight chains"): "k16_softmax_chains",
}
