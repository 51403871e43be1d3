"""Runs one command and writes its peak resident set size (getrusage's ru_maxrss of the child,
in MiB) to DIR/rss.$RANK: the measure the peers take of themselves (common.max_rss_mib),
taken of loom's ranks, each launched by torchrun --no-python through this wrapper:

    torchrun --nproc-per-node 2 --no-python python3 bench/peers/maxrss.py DIR loom train ...
"""
import os
import resource
import subprocess
import sys


def main():
    out, cmd = sys.argv[1], sys.argv[2:]
    code = subprocess.call(cmd)
    kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    with open(os.path.join(out, f"rss.{os.environ.get('RANK', '0')}"), "w") as f:
        f.write(f"{kib / 1024:.0f}\n")
    sys.exit(code)


if __name__ == "__main__":
    main()
