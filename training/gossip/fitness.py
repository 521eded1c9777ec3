"""An island's fitness: minus the exponential moving average of its training loss (bits/byte), as
gruboros keeps it. The first loss starts the average; before it the fitness is -inf."""

import math


def fitness_of_loss(loss):
    """The one sign flip: a loss (lower is better) as a fitness (higher is better)."""
    return -loss


class FitnessEma:
    def __init__(self, decay=0.995, ema=None):
        self.decay, self.ema = decay, ema

    def update(self, loss):
        self.ema = loss if self.ema is None else self.decay * self.ema + (1 - self.decay) * loss
        return self.fitness

    @property
    def fitness(self):
        return -math.inf if self.ema is None else fitness_of_loss(self.ema)

    @property
    def loss(self):
        """The average loss (inf before the first step)."""
        return math.inf if self.ema is None else self.ema

    def inherit(self, fitness):
        """Take another island's fitness (a clonal merge, a rejuvenation)."""
        self.ema = None if fitness == -math.inf else fitness_of_loss(fitness)
