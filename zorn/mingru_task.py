"""The MinGRU LM as a zorn model: the loss interface of the LSTM and the DNC (mask-weighted mean
cross-entropy in bits of a TaskBatch, from one flat parameter vector, and its BPTT gradient)."""

import numpy as np

from eggnog.kernels.core.placement import kernels_for
from eggnog.kernels.layers.elementwise import scale_rows
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.weighted_sums import weighted_means
from eggnog.models.mingru import MinGruModel


class MinGruTaskModel:
    def __init__(self, cfg):
        self.model = MinGruModel(cfg)
        self.n_params = self.model.n_params

    def init_params(self, seed):
        return self.model.init_params(seed)

    def architecture(self):
        return self.model.architecture()

    def _views(self, ops, flat):
        return self.model.views(ops.to_device(flat) if isinstance(flat, np.ndarray) else flat)

    def _rows(self, ops, flat, batch, keep):
        p = self._views(ops, flat)
        logits, _, cache = self.model.forward(ops, p, np.ascontiguousarray(batch.inputs, np.uint8), keep=keep)
        rows, dlogits = cross_entropy(ops, logits, ops.to_device(np.ascontiguousarray(batch.targets).reshape(-1)))
        weights = np.asarray(batch.mask, np.float64).reshape(-1)
        return p, cache, float(weighted_means(ops, rows, weights)[0]), dlogits, weights

    def loss(self, backend, flat, batch):
        return self._rows(kernels_for(backend), flat, batch, keep=False)[2]

    def loss_and_grad(self, backend, flat, batch, on_device=False):
        ops = kernels_for(backend)
        p, cache, loss, dlogits, weights = self._rows(ops, flat, batch, keep=True)
        # dlogits is the gradient of the plain mean over rows: reweight it to the masked mean, on the device
        scale = (weights * (weights.size / weights.sum())).astype(ops.dtype)
        grads = self.model.backward(ops, p, cache, scale_rows(ops, dlogits, ops.to_device(scale)))
        return loss, self.model.flatten_on(grads, ops) if on_device else self.model.flatten(grads, ops)

    def logits(self, backend, flat, inputs):
        """Host logits (B, T, V) for token ids (B, T)."""
        ops = kernels_for(backend)
        inputs = np.ascontiguousarray(inputs, np.uint8)
        logits, _, _ = self.model.forward(ops, self._views(ops, flat), inputs, keep=False)
        return np.asarray(ops.to_host(logits)).reshape(inputs.shape[0], inputs.shape[1], -1)
