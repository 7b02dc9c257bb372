"""Run chapters once causal and once not at a ragged shape, for compute-sanitizer's memcheck, racecheck, synccheck.

    compute-sanitizer --tool racecheck --error-exitcode 1 python scripts/sanitize.py 5 7

333 rows is no multiple of any tile, so the last query and key tiles are cut short, and the causal mask cuts
through the diagonal tiles: where out-of-bounds accesses and missing barriers would show.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from kernels.tools import run_once  # noqa: E402
from kernels.tools.cli import Parser  # noqa: E402

RAGGED = ["--batch", "2", "--seq-len", "333", "--heads", "2"]


def main(argv: list[str]) -> int:
    """Each chosen chapter (default: all that run on this GPU), causal and then not, each launch once."""
    parser = Parser(prog="sanitize.py", description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", help="by number or slug (default: every chapter)")
    names = parser.parse_args(argv).chapters or [target.token for target in run_once.targets([]) if target.chapter]
    return run_once.main([*names, *RAGGED, "--causal"], parser.prog) or run_once.main([*names, *RAGGED], parser.prog)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
