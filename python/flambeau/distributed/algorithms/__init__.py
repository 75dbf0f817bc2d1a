"""flambeau.distributed.algorithms (as torch.distributed.algorithms): DDP communication hooks."""
