"""Chapter 14 taken apart: the softmax under P V, with and without chapter 13's descriptors."""

TITLE = "wgmma descriptors against the schedule: rebuilt for every wgmma or made once, wait for each product or not"
ROWS = ("descriptors rebuilt per wgmma (kernel 12)", "descriptors made once (kernel 13)")
COLUMNS = ("wait for each product", "softmax under P V")
CELLS = {
    ("descriptors rebuilt per wgmma (kernel 12)", "wait for each product"): "k12_warp_specialized",
    ("descriptors rebuilt per wgmma (kernel 12)", "softmax under P V"): "k14_rebuilt_descriptors",
    ("descriptors made once (kernel 13)", "wait for each product"): "k13_descriptors",
    ("descriptors made once (kernel 13)", "softmax under P V"): "k14_overlap",
}
