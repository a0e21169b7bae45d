import json, sys

OLD, NEW = (sys.argv[1:3] if len(sys.argv) > 2 else ("/tmp/baseline/old", "/tmp/baseline/new"))
for arm in ["direct", "st", "st_w8v"]:
    try:
        old = [json.loads(l) for l in open(f"{OLD}/{arm}.jsonl")]
        new = [json.loads(l) for l in open(f"{NEW}/{arm}.jsonl")]
    except FileNotFoundError:
        continue
    same = 0
    for o, n in zip(old, new):
        if json.dumps(o, sort_keys=False) == json.dumps(n, sort_keys=False):
            same += 1
        else:
            keys = sorted(k for k in set(o) | set(n) if o.get(k) != n.get(k))
            order = list(o) != list(n)
            print(f"  {arm} {o['id']}: differs in {keys}{' (key order)' if order else ''}")
    print(f"{arm}: {same} of {min(len(old), len(new))} records byte-identical (old {len(old)}, new {len(new)})")
