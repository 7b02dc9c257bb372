"""Time every chapter and torch's attention on the same Q, K, V, in interleaved rounds, and print the ladder.

python runner.py                        # the headline shape: batch 16, seq 4096, 16 heads, bf16
python runner.py --causal --seq-len 1024,16384 --kernels 3,4
python runner.py --markdown --json run.json --plot ladder.png
python runner.py ablate 5               # one step of the ladder taken apart (a grid of kernels)
python runner.py inspect | diff 3 4 | profile 5 | stalls 19 | peak     (see `python runner.py inspect --help`, ...)

The commands live in kernels/tools/ (kernels/tools/commands.py lists them); this file only starts them.
"""

import sys

from kernels.tools.commands import main

if __name__ == "__main__":
    sys.exit(main())
