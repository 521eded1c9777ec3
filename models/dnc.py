"""The simplified DNC of the zero-order RNN paper (Chaubard & Kochenderfer, "Scaling Recurrent Neural
Networks to a Billion Parameters with Zero-Order Optimization", 2025; class DNC of the authors' code,
sisl/zero_order_rnn), fp32 over one flat parameter buffer, with exact BPTT through the memory.

More in docs/internals.md (models/dnc.py)."""

import math
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from eggnog.kernels.core.placement import BackendArray, Kernels, kernels_for
from eggnog.kernels.layers.elementwise import accumulate, add, add_bias, column_sum, scale_rows
from eggnog.kernels.layers.embedding import embedding, embedding_backward
from eggnog.kernels.layers.losses import cross_entropy
from eggnog.kernels.layers.matmul import matmul, matmul_backward
from eggnog.kernels.layers.norms import layernorm, layernorm_backward
from eggnog.kernels.layers.weighted_sums import weighted_means
from eggnog.kernels.rnn.dnc_addressing import (
    content_address,
    content_address_backward,
    content_read,
    content_read_backward,
)
from eggnog.kernels.rnn.dnc_interface import dnc_interface, dnc_interface_backward
from eggnog.kernels.rnn.dnc_memory import memory_write, memory_write_backward
from eggnog.kernels.rnn.lstm_cell import lstm_cell, lstm_cell_backward
from eggnog.models.dnc_windows import concat_columns, put_rows, take_columns, take_rows
from eggnog.models.flat_params import FlatParams
from eggnog.runtime.errors import BadInput


@dataclass(frozen=True)
class DncConfig:
    vocab_size: int = 100
    input_size: int = 32      # E, embedding width
    hidden_size: int = 128    # H, LSTM width
    memory_size: int = 128    # M, memory rows
    head_size: int = 128      # W, memory row width
    num_reads: int = 1        # R, read heads

    def check(self) -> "DncConfig":
        sizes = asdict(self)
        bad = [f"{k} {v}" for k, v in sizes.items() if not isinstance(v, (int, np.integer)) or v < 1]
        if bad:
            raise BadInput(f"DNC sizes must be positive integers, got {', '.join(bad)}")
        if self.vocab_size > 256:
            raise BadInput(f"DNC vocab_size must be at most 256 (tokens are bytes), got {self.vocab_size}")
        return self

    @classmethod
    def figure1(cls, scale: int) -> "DncConfig":
        """The Figure-1 DNC: H = M = W = 128 scale, R = 1, E = 32, V = 100."""
        n = 128 * scale
        return cls(100, 32, n, n, n, 1)


HEAD_NAMES = ("fc_read_keys", "fc_write_keys", "fc_erase_vector", "fc_add_vector", "fc_write_strength")


def tensor_specs(cfg: DncConfig) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, shape, init) in storage order; init "normal", "xavier", "ones" or "zeros"."""
    v, e, h, w, rw = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.head_size, cfg.num_reads * cfg.head_size
    c = e + rw
    head_out = {"fc_read_keys": rw, "fc_write_keys": w, "fc_erase_vector": w, "fc_add_vector": w,
                "fc_write_strength": 1}
    specs = [("embed.weight", (v, e), "normal"),
             ("input_norm.weight", (c,), "ones"), ("input_norm.bias", (c,), "zeros"),
             ("controller.weight_ih", (4 * h, c), "xavier"), ("controller.weight_hh", (4 * h, h), "xavier"),
             ("controller.bias_ih", (4 * h,), "zeros"), ("controller.bias_hh", (4 * h,), "zeros"),
             ("controller_norm.weight", (h,), "ones"), ("controller_norm.bias", (h,), "zeros")]
    specs += [(f"{n}.weight", (head_out[n], h), "xavier") for n in HEAD_NAMES]
    specs += [(f"{n}.bias", (head_out[n],), "zeros") for n in HEAD_NAMES]
    for norm in ("read_keys_norm", "write_keys_norm", "memory_norm"):
        specs += [(f"{norm}.weight", (w,), "ones"), (f"{norm}.bias", (w,), "zeros")]
    specs += [("pre_output_norm.weight", (h + rw,), "ones"), ("pre_output_norm.bias", (h + rw,), "zeros"),
              ("fc_proj.weight", (v, h + rw), "xavier"), ("fc_proj.bias", (v,), "zeros")]
    return specs


def formula_params(cfg: DncConfig) -> int:
    """The parameter count as one closed formula, term by term, for cross-checking `n_params` (which
    counts the tensor specs)."""
    v, e, h, w, r = cfg.vocab_size, cfg.input_size, cfg.hidden_size, cfg.head_size, cfg.num_reads
    rw, c = r * w, e + r * w
    return (v * e + 2 * c + (4 * h * c + 4 * h * h + 8 * h) + 2 * h + (h * rw + rw) + 3 * (h * w + w) + (h + 1)
            + 6 * w + 2 * (h + rw) + (h + rw) * v + v)


class DncModel(FlatParams):
    def __init__(self, cfg: DncConfig) -> None:
        self.cfg = cfg.check()
        super().__init__(tensor_specs(cfg))
        h, w, rw = cfg.hidden_size, cfg.head_size, cfg.num_reads * cfg.head_size
        self.n_iface = rw + 3 * w + 1
        # the fused head weight (n_iface, H) and bias (n_iface,) as ranges of the flat vector
        self.fused = {"heads.weight": (self.offsets["fc_read_keys.weight"][0], (self.n_iface, h)),
                      "heads.bias": (self.offsets["fc_read_keys.bias"][0], (self.n_iface,))}

    # ---- parameters -------------------------------------------------------------------------------
    def architecture(self) -> dict[str, Any]:
        return {"model": "dnc", "total_params": self.n_params,
                "config": {**asdict(self.cfg), "controller_input": self.cfg.input_size + self.cfg.num_reads
                           * self.cfg.head_size, "interface": self.n_iface},
                "tensors": [{"name": n, "shape": list(s), "kind": "matrix" if len(s) == 2 else "vector",
                             "params": math.prod(s)} for n, s, _ in self.specs]}

    def init_params(self, seed: int) -> np.ndarray:
        rng = np.random.default_rng(seed)
        flat = np.empty(self.n_params, np.float32)
        for name, shape, init in self.specs:
            start, _ = self.offsets[name]
            n = math.prod(shape)
            if init == "normal":
                values = rng.normal(0.0, 1.0, n)
            elif init == "xavier":
                bound = math.sqrt(6.0 / (shape[0] + shape[1]))
                values = rng.uniform(-bound, bound, n)
            else:
                values = np.full(n, 1.0 if init == "ones" else 0.0)
            flat[start:start + n] = values
        return flat

    def views(self, flat: BackendArray) -> dict[str, BackendArray]:  # type: ignore[override]  # fused ranges always
        """Named tensors over a flat vector (host or device), plus the fused "heads.weight" and
        "heads.bias"; no copies."""
        return super().views(flat, self.fused)

    # ---- forward ----------------------------------------------------------------------------------
    def _check_batch(self, batch: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        inputs, targets, mask = (np.asarray(a) for a in (batch.inputs, batch.targets, batch.mask))
        if inputs.ndim != 2 or inputs.shape != targets.shape or inputs.shape != mask.shape or inputs.size == 0:
            raise BadInput(f"a DNC batch needs inputs, targets and mask of one non-empty (B, T) shape, got "
                           f"{inputs.shape}, {targets.shape}, {mask.shape}")
        if max(int(inputs.max()), int(targets.max())) >= self.cfg.vocab_size:
            raise BadInput(f"token ids must be below the DNC vocab_size {self.cfg.vocab_size}")
        if not float(mask.sum()) > 0:
            raise BadInput("the batch mask selects no predictions")
        return inputs, targets, mask

    def forward(self, ops: Kernels, p: dict[str, BackendArray], inputs: np.ndarray, keep: bool = False,
                memory0: npt.ArrayLike | None = None) -> tuple[BackendArray, dict[str, Any] | None]:
        """Logits (T B, V), time-major, for tokens `inputs` (B, T); with keep, also the cache.
        `memory0` (B, M, W), a constant, replaces the zero initial memory."""
        cfg = self.cfg
        batch, steps = inputs.shape
        h, m, w, r = cfg.hidden_size, cfg.memory_size, cfg.head_size, cfg.num_reads
        rw = r * w
        tokens = ops.to_device(np.ascontiguousarray(np.asarray(inputs).T, np.uint8).reshape(-1))
        x_all = embedding(ops, p["embed.weight"], tokens)
        bias = add(ops, p["controller.bias_ih"], p["controller.bias_hh"])
        hid, cell, reads = ops.zeros((batch, h)), ops.zeros((batch, h)), ops.zeros((batch, rw))
        if memory0 is None:
            mem = ops.zeros((batch * m, w))
        else:
            mem = ops.to_device(np.ascontiguousarray(np.asarray(memory0).reshape(batch * m, w), ops.dtype))
        mem_ln = layernorm(ops, mem, p["memory_norm.weight"], p["memory_norm.bias"])
        hn_all, reads_all = ops.empty((steps * batch, h)), ops.empty((steps * batch, rw))
        cache: dict[str, Any] = {"tokens": tokens, "steps": [], "mem0": mem, "mem0_ln": mem_ln}
        for t in range(steps):
            x = take_rows(ops, x_all, t * batch, batch)
            u = concat_columns(ops, [x, reads])
            un, u_mean, u_rstd = layernorm(ops, u, p["input_norm.weight"], p["input_norm.bias"])
            pre = matmul(ops, un, p["controller.weight_ih"])
            accumulate(ops, pre, matmul(ops, hid, p["controller.weight_hh"]))
            gates = add_bias(ops, pre, bias)
            h_new, c_new = lstm_cell(ops, gates, cell)
            hn, h_mean, h_rstd = layernorm(ops, h_new, p["controller_norm.weight"], p["controller_norm.bias"])
            iface = add_bias(ops, matmul(ops, hn, p["heads.weight"]), p["heads.bias"])
            rk, wk, erase, added, strength = dnc_interface(ops, iface, w)
            # write, addressed on the memory before it
            wkn = layernorm(ops, wk, p["write_keys_norm.weight"], p["write_keys_norm.bias"])
            pw = content_address(ops, wkn[0].reshape(batch, 1, w), mem_ln[0].reshape(batch, m, w)).reshape(batch, m)
            mem_new = memory_write(ops, mem.reshape(batch, m, w), pw, strength, erase, added).reshape(batch * m, w)
            mem_new_ln = layernorm(ops, mem_new, p["memory_norm.weight"], p["memory_norm.bias"])
            # read, addressed on the memory after it
            rkn = layernorm(ops, rk.reshape(batch * r, w), p["read_keys_norm.weight"], p["read_keys_norm.bias"])
            pr, reads = content_read(ops, rkn[0].reshape(batch, r, w), mem_new_ln[0].reshape(batch, m, w),
                                     mem_new.reshape(batch, m, w))
            pr, reads = pr.reshape(batch * r, m), reads.reshape(batch, rw)
            put_rows(ops, hn_all, t * batch, hn)
            put_rows(ops, reads_all, t * batch, reads)
            if keep:
                cache["steps"].append(dict(
                    u=u, un=un, u_stats=(u_mean, u_rstd), h_prev=hid, c_prev=cell, gates=gates, h=h_new, c=c_new,
                    hn=hn, h_stats=(h_mean, h_rstd), rk=rk, wk=wk, erase=erase, add=added, strength=strength, wkn=wkn,
                    pw=pw, mem_prev=mem, mem_prev_ln=mem_ln, mem=mem_new, mem_ln=mem_new_ln, rkn=rkn, pr=pr))
            hid, cell, mem, mem_ln = h_new, c_new, mem_new, mem_new_ln
        out = concat_columns(ops, [hn_all, reads_all])
        on, o_mean, o_rstd = layernorm(ops, out, p["pre_output_norm.weight"], p["pre_output_norm.bias"])
        logits = add_bias(ops, matmul(ops, on, p["fc_proj.weight"]), p["fc_proj.bias"])
        cache.update(out=out, on=on, o_stats=(o_mean, o_rstd), shape=(batch, steps))
        return logits, (cache if keep else None)

    # ---- backward ---------------------------------------------------------------------------------
    def backward(self, ops: Kernels, p: dict[str, BackendArray], cache: dict[str, Any],
                 dlogits: BackendArray) -> dict[str, BackendArray]:
        """Gradients (named, on the backend; "heads.*" fused) of the loss whose logit gradient is
        `dlogits`, by BPTT through the controller and the memory."""
        cfg = self.cfg
        batch, steps = cache["shape"]
        e, h, m, w, r = cfg.input_size, cfg.hidden_size, cfg.memory_size, cfg.head_size, cfg.num_reads
        rw = r * w
        g: dict[str, BackendArray] = {}

        def acc(name: str, value: BackendArray) -> None:
            if name in g:
                accumulate(ops, g[name], value)
            else:
                g[name] = value

        def ln_back(dy: BackendArray, x: BackendArray, stats: Any, norm: str) -> BackendArray:
            dx, dw, db = layernorm_backward(ops, dy, x, p[norm + ".weight"], *stats)
            acc(norm + ".weight", dw)
            acc(norm + ".bias", db)
            return dx

        don, g["fc_proj.weight"] = matmul_backward(ops, dlogits, cache["on"], p["fc_proj.weight"])
        g["fc_proj.bias"] = column_sum(ops, dlogits)
        dout = ln_back(don, cache["out"], cache["o_stats"], "pre_output_norm")
        dhn_all, dreads_all = take_columns(ops, dout, 0, h), take_columns(ops, dout, h, rw)
        dh, dc, dr = ops.zeros((batch, h)), ops.zeros((batch, h)), ops.zeros((batch, rw))
        dmem = ops.zeros((batch, m, w))      # into mem_t (the memory after step t's write)
        dmem_ln = ops.zeros((batch, m, w))   # into LN_mem(mem_t), from step t+1's write addressing
        dx_all = ops.empty((steps * batch, e))
        for t in range(steps - 1, -1, -1):
            s = cache["steps"][t]
            mem3 = s["mem"].reshape(batch, m, w)
            # read
            dreads = take_rows(ops, dreads_all, t * batch, batch)
            accumulate(ops, dreads, dr)
            drkn, dmem_ln_read, dmem_read = content_read_backward(ops,
                dreads.reshape(batch, r, w), s["pr"].reshape(batch, r, m), s["rkn"][0].reshape(batch, r, w),
                s["mem_ln"][0].reshape(batch, m, w), mem3)
            accumulate(ops, dmem, dmem_read)
            accumulate(ops, dmem_ln, dmem_ln_read)
            dm = ln_back(dmem_ln.reshape(batch * m, w), s["mem"], s["mem_ln"][1:], "memory_norm")
            accumulate(ops, dmem, dm.reshape(batch, m, w))
            # write
            dmem_prev, dpw, dstrength, derase, dadd = memory_write_backward(ops,
                dmem, s["mem_prev"].reshape(batch, m, w), s["pw"], s["strength"], s["erase"], s["add"])
            dwkn, dmem_ln = content_address_backward(ops, dpw.reshape(batch, 1, m), s["pw"].reshape(batch, 1, m),
                                                     s["wkn"][0].reshape(batch, 1, w),
                                                     s["mem_prev_ln"][0].reshape(batch, m, w))
            dwkn = dwkn.reshape(batch, w)
            dmem = dmem_prev
            # heads
            drk = ln_back(drkn.reshape(batch * r, w), s["rk"].reshape(batch * r, w), s["rkn"][1:], "read_keys_norm")
            dwk = ln_back(dwkn, s["wk"], s["wkn"][1:], "write_keys_norm")
            diface = dnc_interface_backward(ops, drk.reshape(batch, rw), dwk, derase, dadd, dstrength.reshape(batch),
                                            s["erase"], s["add"], s["strength"])
            dhn, dheads = matmul_backward(ops, diface, s["hn"], p["heads.weight"])
            acc("heads.weight", dheads)
            acc("heads.bias", column_sum(ops, diface))
            # controller
            accumulate(ops, dhn, take_rows(ops, dhn_all, t * batch, batch))
            dh_total = ln_back(dhn, s["h"], s["h_stats"], "controller_norm")
            accumulate(ops, dh_total, dh)
            dgates, dc = lstm_cell_backward(ops, dh_total, dc, s["gates"], s["c_prev"], s["c"])
            acc("controller.bias_ih", column_sum(ops, dgates))
            dun, dwih = matmul_backward(ops, dgates, s["un"], p["controller.weight_ih"])
            dh, dwhh = matmul_backward(ops, dgates, s["h_prev"], p["controller.weight_hh"])
            acc("controller.weight_ih", dwih)
            acc("controller.weight_hh", dwhh)
            du = ln_back(dun, s["u"], s["u_stats"], "input_norm")
            put_rows(ops, dx_all, t * batch, take_columns(ops, du, 0, e))
            dr = take_columns(ops, du, e, rw)
        # LN_mem of the zero memory at the start still feeds the first write's addressing
        ln_back(dmem_ln.reshape(batch * m, w), cache["mem0"], cache["mem0_ln"][1:], "memory_norm")
        g["controller.bias_hh"] = g["controller.bias_ih"]
        g["embed.weight"] = embedding_backward(ops, dx_all, cache["tokens"], cfg.vocab_size)
        return g

    def flatten(self, grads: dict[str, Any], ops: Kernels,  # type: ignore[override]  # fused ranges always
                dtype: npt.DTypeLike = np.float32) -> np.ndarray:
        """One host vector (float32 unless asked) from named (and fused) gradients."""
        return super().flatten(grads, ops, dtype, self.fused)

    def flatten_on(self, grads: dict[str, Any], ops: Kernels) -> BackendArray:  # type: ignore[override]  # fused always
        return super().flatten_on(grads, ops, self.fused)

    # ---- losses ------------------------------------------------------------------------------------
    def _loss_parts(self, ops: Kernels, flat: BackendArray, batch: Any, keep: bool, memory0: npt.ArrayLike | None = None
                    ) -> tuple[float, dict[str, BackendArray], dict[str, Any] | None, BackendArray, np.ndarray, float]:
        inputs, targets, mask = self._check_batch(batch)
        on_device = hasattr(flat, "copy_to_host")
        flat = flat if on_device else np.asarray(flat)
        if flat.shape != (self.n_params,):
            raise BadInput(f"the DNC needs {self.n_params} parameters, got an array of shape {flat.shape}")
        p = self.views(flat if on_device else ops.to_device(np.ascontiguousarray(flat, ops.dtype)))
        if memory0 is not None and np.shape(memory0) != (inputs.shape[0], self.cfg.memory_size, self.cfg.head_size):
            expected = (inputs.shape[0], self.cfg.memory_size, self.cfg.head_size)
            raise BadInput(f"memory0 must have shape (B, M, W) = {expected}")
        logits, cache = self.forward(ops, p, inputs, keep, memory0)
        tgt = ops.to_device(np.ascontiguousarray(targets.T, np.uint8).reshape(-1))
        rows, dlogits = cross_entropy(ops, logits, tgt)
        weights = np.ascontiguousarray(mask.T, np.float64).reshape(-1)
        total = weights.sum()
        loss = float(weighted_means(ops, rows, weights)[0])
        return loss, p, cache, dlogits, weights, total

    def loss(self, backend: str, flat: BackendArray, batch: Any, memory0: npt.ArrayLike | None = None) -> float:
        """Mask-weighted mean cross-entropy in bits; backend "numpy" (float64), "cpu" or "cuda"."""
        return self._loss_parts(kernels_for(backend), flat, batch, False, memory0)[0]

    def logits(self, backend: str, flat: BackendArray, inputs: npt.ArrayLike) -> np.ndarray:
        """Host logits (B, T, V) for token ids (B, T)."""
        ops = kernels_for(backend)
        inputs = np.asarray(inputs)
        if inputs.ndim != 2 or inputs.size == 0 or int(inputs.max()) >= self.cfg.vocab_size:
            raise BadInput(f"DNC inputs must be a non-empty (B, T) array of ids below {self.cfg.vocab_size}")
        p = self.views(ops.to_device(np.ascontiguousarray(flat, ops.dtype)))
        logits, _ = self.forward(ops, p, inputs)
        batch, steps = inputs.shape
        return np.ascontiguousarray(ops.to_host(logits).reshape(steps, batch, -1).transpose(1, 0, 2))

    def loss_and_grad(self, backend: str, flat: BackendArray, batch: Any, dtype: npt.DTypeLike = np.float32,
                      memory0: npt.ArrayLike | None = None, on_device: bool = False) -> tuple[float, BackendArray]:
        """(loss, gradient as a host vector in storage order) by BPTT; float32 unless `dtype` asks
        otherwise (float64 keeps the "numpy" reference exact, for finite-difference checks). With
        `on_device`, the gradient stays where the backend keeps it (a device array on the GPU)."""
        ops = kernels_for(backend)
        loss, p, cache, dlogits, weights, total = self._loss_parts(ops, flat, batch, True, memory0)
        # cross_entropy's gradient is that of the plain mean over rows: reweight rows to the masked mean
        scale = ops.to_device(np.ascontiguousarray(weights * (weights.size / total), ops.dtype))
        grads = self.backward(ops, p, cast(dict[str, Any], cache), scale_rows(ops, dlogits, scale))
        return loss, self.flatten_on(grads, ops) if on_device else self.flatten(grads, ops, dtype)
