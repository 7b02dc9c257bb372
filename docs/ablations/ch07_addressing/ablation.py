"""Chapter 7 taken apart: its fragment addressing at 64-key tiles, and at the 128-key tiles of chapter 8."""

TITLE = "fragment addressing against tile length: smem_index() or one XOR per block, 64 or 128 keys per tile"
ROWS = ("smem_index() per block (kernel 6)", "one XOR per block (kernel 7)")
COLUMNS = ("64-key tiles", "128-key tiles")
CELLS = {
    ("smem_index() per block (kernel 6)", "64-key tiles"): "k06_exp2",
    ("smem_index() per block (kernel 6)", "128-key tiles"): "k06_kv128",
    ("one XOR per block (kernel 7)", "64-key tiles"): "k07_addressing",
    ("one XOR per block (kernel 7)", "128-key tiles"): "k08_kv128",
}
