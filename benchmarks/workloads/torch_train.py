"""A small PyTorch CPU training loop: a 3-layer MLP on synthetic data, SGD with momentum.

Needs torch (the benchmark environment installs torch==2.13.0, CPU build).
Usage: python torch_train.py [SCALE]   (SCALE=1.0 is about 2-4 s)
"""

import sys

import torch


def main(scale):
    torch.manual_seed(0)
    torch.set_num_threads(2)
    steps = max(5, int(300 * scale))
    inputs = torch.randn(4096, 256)
    targets = (inputs[:, :8].sum(dim=1) > 0).long()
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 2))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    for step in range(steps):
        batch = slice((step * 256) % 4096, (step * 256) % 4096 + 256)
        optimiser.zero_grad()
        loss = loss_fn(model(inputs[batch]), targets[batch])
        loss.backward()
        optimiser.step()
    print(f"torch_train: {steps} steps, final loss {loss.item():.4f}")


if __name__ == "__main__":
    main(float(sys.argv[1]) if len(sys.argv) > 1 else 1.0)
