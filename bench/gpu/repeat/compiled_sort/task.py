import torch

input_t = tuple[torch.Tensor, torch.Tensor]
output_t = torch.Tensor
