"""DPO entry point for ``accelerate launch``, the same plain function as ``kate train dpo``.

    python train/dpo.py init_adapter=train/runs/sft/final
    accelerate launch --config_file train/accelerate/zero2.yaml train/dpo.py bf16=true dtype=bfloat16
"""

import sys

from kate.cli import main

if __name__ == "__main__":
    main(["train", "dpo", *sys.argv[1:]])
