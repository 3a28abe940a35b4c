"""One rank of codist.rank.train with DeepSpeed's own comms logger on (tests/test_comm.py): after
the run, what the logger saw goes to OUT/ds_comms-rank<r>.json as {op: {bytes per call: calls}}.

    python -m torch.distributed.run --nproc_per_node 2 tests/ds_comms_logger_rank.py --config C --out OUT
"""
import json
import os
import sys

import deepspeed.comm.comm as ds_comm

from codist.rank import train

ds_comm.configure(enabled=True, prof_all=True, verbose=False)
rc = train.main(sys.argv[1:])
out = sys.argv[sys.argv.index("--out") + 1]
seen = {op: {str(size): record[0] for size, record in sizes.items()}
        for op, sizes in ds_comm.comms_logger.comms_dict.items()}
with open(os.path.join(out, f"ds_comms-rank{os.environ['RANK']}.json"), "w") as f:
    json.dump(seen, f)
sys.exit(rc)
