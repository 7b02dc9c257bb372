"""The figures under docs/: one module per figure or close group of figures, each drawn from the kernels' own
formulas or from a results/ file, with the look they share in style.py. make_figures.py draws them."""

import matplotlib

matplotlib.use("Agg")  # off-screen: the figures are only ever written to PNG files
