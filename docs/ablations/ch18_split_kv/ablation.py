"""The softmax under P V in the source and in the machine code: kernels 14 and 18, without and with the fence."""

TITLE = "the wait for P V where ptxas puts it, or below the softmax (a fence): kernel 14 and kernel 18"
ROWS = ("a block per query tile (kernel 14)", "the end of the ladder (kernel 18)")
COLUMNS = ("wait hoisted by ptxas", "fence below the softmax")
CELLS = {
    ("a block per query tile (kernel 14)", "wait hoisted by ptxas"): "k14_overlap",
    ("a block per query tile (kernel 14)", "fence below the softmax"): "k14_fenced_softmax",
    ("the end of the ladder (kernel 18)", "wait hoisted by ptxas"): "k18_split_kv",
    ("the end of the ladder (kernel 18)", "fence below the softmax"): "k18_fenced_softmax",
}
