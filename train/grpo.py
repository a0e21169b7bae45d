"""GRPO entry point for ``accelerate launch``, the same plain function as ``kate train grpo``.

    python train/grpo.py init_adapter=train/runs/sft/final
    accelerate launch --config_file train/accelerate/fsdp.yaml train/grpo.py bf16=true dtype=bfloat16 use_vllm=true
"""

import sys

from kate.cli import main

if __name__ == "__main__":
    main(["train", "grpo", *sys.argv[1:]])
