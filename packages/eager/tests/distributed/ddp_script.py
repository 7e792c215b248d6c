"""A DDP training run launched as users launch one: torchrun sets RANK, WORLD_SIZE and LOCAL_RANK, the script
picks its device by LOCAL_RANK and checks its weights against single-process CPU training."""

import os

import ranks
import torch

if __name__ == "__main__":
    torch.openreg.set_device(int(os.environ["LOCAL_RANK"]))
    ranks.ddp(int(os.environ["RANK"]))
    print(f"rank {os.environ['RANK']} trained on openreg:{torch.openreg.current_device()}")
