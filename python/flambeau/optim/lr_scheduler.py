"""Learning-rate schedules (torch.optim.lr_scheduler), in closed form: call step() once
per epoch (or iteration) after optimizer.step()."""
import bisect
import math

__all__ = ["LRScheduler", "LambdaLR", "StepLR", "LinearLR", "CosineAnnealingLR", "SequentialLR"]


class LRScheduler:
    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        # As torch's initial_lr: every scheduler of an optimizer starts from the first lr.
        if not hasattr(optimizer, "initial_lr"):
            optimizer.initial_lr = optimizer.lr
        self.base_lr = optimizer.initial_lr
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, epoch):
        raise NotImplementedError

    def step(self):
        self.last_epoch += 1
        self.optimizer.lr = self.lr_at(self.last_epoch)

    def get_last_lr(self):
        return [self.optimizer.lr]

    def state_dict(self):
        return {"last_epoch": self.last_epoch, "base_lr": self.base_lr}

    def load_state_dict(self, state):
        self.last_epoch, self.base_lr = state["last_epoch"], state["base_lr"]
        self.optimizer.lr = self.lr_at(self.last_epoch)


class LambdaLR(LRScheduler):
    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return self.base_lr * self.lr_lambda(epoch)


class StepLR(LRScheduler):
    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return self.base_lr * self.gamma ** (epoch // self.step_size)


class LinearLR(LRScheduler):
    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("Starting and ending multiplicative factors should be in (0, 1] and [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        t = min(epoch, self.total_iters) / self.total_iters
        return self.base_lr * (self.start_factor + (self.end_factor - self.start_factor) * t)


class CosineAnnealingLR(LRScheduler):
    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return self.eta_min + (self.base_lr - self.eta_min) * (1 + math.cos(math.pi * epoch / self.T_max)) / 2


class SequentialLR(LRScheduler):
    """Runs schedulers one after another, switching at the milestones (each restarts at 0)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError("SequentialLR expects len(milestones) == len(schedulers) - 1")
        self.schedulers, self.milestones = schedulers, list(milestones)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        i = bisect.bisect_right(self.milestones, epoch)
        start = self.milestones[i - 1] if i > 0 else 0
        return self.schedulers[i].lr_at(epoch - start)
