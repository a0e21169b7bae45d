"""The same slice on the NEW code, arms composed by name (conf/arm/) exactly as `kate eval arm=X` does."""
import json, sys
import kate.configs  # noqa
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate
from kate.cli import CONF_DIR
from kate.eval.arm import build_policy, loop_settings
from kate.eval.config import plain
from kate.eval.runner import run_item
from kate.tasks.bfcl import BFCLTask
from kate.bfcl.data import load_entries
SINGLE = ["simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance", "live_simple", "live_multiple"]
def slice_for(arm):
    single = [e for c in SINGLE for e in load_entries(c, "test", 2 if arm != "st_w8v" else 1)][: (14 if arm != "st_w8v" else 4)]
    multi = [e for e in load_entries("multi_turn_base", "test", 10) if e.id in ({"multi_turn_base_13", "multi_turn_base_19"} if arm != "st_w8v" else {"multi_turn_base_19"})]
    return single + multi
out = sys.argv[1]
model = None
for arm in sys.argv[2].split(","):
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        c = plain(compose("eval", overrides=[f"arm={arm}", "llm.max_parallel=8"]))
    model = model or instantiate(c["llm"])
    policy = build_policy(model, c["sampling"], c["knowledge"], loop_settings(c))
    entries = slice_for(arm)
    task = BFCLTask(entries, "test")
    with open(f"{out}/{arm}.jsonl", "w") as f:
        for e in entries:
            r = run_item(task, e, policy, 0).to_dict()
            r.pop("seconds")
            f.write(json.dumps(r, ensure_ascii=False) + "\n"); f.flush()
            print(arm, e.id, r["valid"], flush=True)
