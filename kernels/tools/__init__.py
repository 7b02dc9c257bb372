"""The tools behind `runner.py`'s subcommands: inspect, diff, profile, peak, ablate, and the ladder's reports.

They stand on the runtime one floor down (``kernels``: build, launch, tensor maps, the chapters, the op);
nothing in the runtime imports from here.
"""
