"""Two torch.distributed ranks (gloo, CPU) with work of known size, for `torchrun`.

Rank r holds (r + 1) x 25 MiB and burns (r + 1) x 0.2 s of CPU, so rank 1 is both the
slowest and the one with the largest peak. stdout: each rank's CPU time around its loop and
the bytes it holds; then (rank 0) their CPU summed with all_reduce: the truth for the burn
lines.
"""
import time

import torch
import torch.distributed as dist


def burn(seconds):
    start = time.process_time()
    total = 0
    while time.process_time() - start < seconds:  # LINE burn_loop
        total += sum(i * i for i in range(200))  # LINE burn_body
    return time.process_time() - start


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    held = torch.ones((rank + 1) * 25 * (1 << 20) // 4)  # LINE hold
    spent = torch.tensor([burn(0.2 * (rank + 1))])
    print(f"rank {rank} cpu_s {float(spent):.6f} held {held.numel() * 4}", flush=True)
    dist.all_reduce(spent)
    if rank == 0:
        print(f"ranks cpu_s {float(spent):.6f} held {held.numel() * 4}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
