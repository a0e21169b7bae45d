"""SFT entry point for ``accelerate launch`` (several GPUs), the same plain function as ``kate train sft``.

    python train/sft.py max_steps=20                     # one process, like `kate train sft`
    accelerate launch --config_file train/accelerate/zero2.yaml train/sft.py bf16=true dtype=bfloat16
"""

import sys

from kate.cli import main

if __name__ == "__main__":
    main(["train", "sft", *sys.argv[1:]])
