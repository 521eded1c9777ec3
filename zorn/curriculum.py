"""The sequence-length curriculum of the authors' distributed script: once the fast EMA of the training
loss has stayed below a threshold for `patience` consecutive steps, the longest training sample grows
by `step`, up to `cap`.

The fast EMA is ema <- 0.9 ema + 0.1 loss, started at the first loss. (The authors' script sets its EMA
constants to 1, which freezes the EMA at the first loss; 0.9 is the fast EMA that code meant.) The
streak restarts after every raise, so each new length must be learnt for `patience` steps before the
next. The state (bound, EMA, streak) travels in checkpoints, so a resumed run continues the rule
exactly.
"""

from dataclasses import dataclass

EMA_DECAY = 0.9


@dataclass
class Curriculum:
    max_seq_len: int
    cap: int
    step: int
    threshold: float
    patience: int
    ema: float | None = None
    streak: int = 0

    def observe(self, loss):
        """Account one step's training loss; the new bound if this step raises it, else None."""
        self.ema = loss if self.ema is None else EMA_DECAY * self.ema + (1 - EMA_DECAY) * loss
        self.streak = self.streak + 1 if self.ema < self.threshold else 0
        if self.streak < self.patience or self.max_seq_len >= self.cap:
            return None
        self.max_seq_len, self.streak = min(self.max_seq_len + self.step, self.cap), 0
        return self.max_seq_len

    def state(self):
        return {"max_seq_len": self.max_seq_len, "ema": self.ema, "streak": self.streak}

    def load(self, state):
        self.max_seq_len, self.ema, self.streak = int(state["max_seq_len"]), state["ema"], int(state["streak"])
