"""The tools behind `runner.py`'s commands: the ladder and ablate, inspect, diff, profile, peak, and the reports.

``commands`` holds every command's options and names the module whose handler runs it; it and ``cli`` import
no torch, so that --help and a mistyped option answer at once. The tools stand on the runtime one floor down
(``kernels``: build, launch, tensor maps, the chapters, the op); nothing in the runtime imports from here.
"""
