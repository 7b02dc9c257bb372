"""L2 prefetch on kernel 19, taken apart: at a query tile's start, and in the tile loop."""

TITLE = "an L2 prefetch of K and V at a query tile's start against one in the tile loop, on kernel 19"
ROWS = ("no prefetch in the tile loop", "the tile a stage ahead prefetched")
COLUMNS = ("no prefetch at a query tile's start", "its first tiles prefetched")
CELLS = {
    ("no prefetch in the tile loop", "no prefetch at a query tile's start"): "k19_dynamic_schedule",
    ("no prefetch in the tile loop", "its first tiles prefetched"): "k19_prefetch_start",
    ("the tile a stage ahead prefetched", "no prefetch at a query tile's start"): "k19_prefetch_loop",
    ("the tile a stage ahead prefetched", "its first tiles prefetched"): "k19_prefetch",
}
CHANGED_LINES = 30  # the prefetch helpers, and the prefetches at a query tile's start and in the tile loop
