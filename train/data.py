"""Data entry point, the same plain function as ``kate train data``.

    python train/data.py limit=10 out_dir=train/data/try
"""

import sys

from kate.cli import main

if __name__ == "__main__":
    main(["train", "data", *sys.argv[1:]])
