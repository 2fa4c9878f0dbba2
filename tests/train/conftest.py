import os

os.environ.setdefault("OMP_NUM_THREADS", "1")   # 2 shared cores: more threads thrash under a loaded machine

import torch  # noqa: E402

torch.set_num_threads(1)
