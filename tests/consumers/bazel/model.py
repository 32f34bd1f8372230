"""The model the consumer test runs: get_model() -> (module, example_inputs)."""

import torch


def get_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return model, (torch.ones(1, 8),)
