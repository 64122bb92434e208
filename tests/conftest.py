import torch

# The test problems are tiny: one thread avoids OpenMP spin-wait overheads
# that dominate small kernels (and oversubscription when the machine is busy).
torch.set_num_threads(1)
