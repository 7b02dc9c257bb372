"""Kernels 18 and 19 trimmed: instructions their steady path spends and FlashAttention-4's does not."""

TITLE = (
    "the steady path trimmed: no inf - inf guard, then sums from their first term and an unsigned tile count too, "
    "then one addition per descriptor"
)
ROWS = ("split-KV (kernel 18)", "the end of the ladder (kernel 19)")
COLUMNS = ("as it is", "max from -FLT_MAX, no guard", "all three trims", "and one addition per descriptor")
CELLS = {
    ("split-KV (kernel 18)", "as it is"): "k18_split_kv",
    ("split-KV (kernel 18)", "max from -FLT_MAX, no guard"): "k18_finite_max",
    ("split-KV (kernel 18)", "all three trims"): "k18_lean",
    ("split-KV (kernel 18)", "and one addition per descriptor"): "k18_lean_descriptors",
    ("the end of the ladder (kernel 19)", "as it is"): "k19_dynamic_schedule",
    ("the end of the ladder (kernel 19)", "max from -FLT_MAX, no guard"): "k19_finite_max",
    ("the end of the ladder (kernel 19)", "all three trims"): "k19_lean",
    ("the end of the ladder (kernel 19)", "and one addition per descriptor"): "k19_lean_descriptors",
}
CHANGED_LINES = 32  # the lean kernels make three small changes at once, and the descriptors' a fourth
