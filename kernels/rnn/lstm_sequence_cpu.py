"""The CPU twin of the multi-head LSTM's whole-sequence forward (the op is lstm.cpu_lstm_forward).

One parallel iteration advances one head over a tile of ROW_TILE batch rows through every step (no
fork/join per step); iterations run head-major, so a thread keeps one head's R in cache over its
tiles. Inside a tile the rows are the innermost axis, acc[g D + d][row], so that:
- the recurrent product is a register-blocked micro-kernel in LLVM vector IR (unit_block_product:
  UNITS outputs x ROW_TILE rows held in 8 AVX2 registers over the head's D inputs),
- the input rows come from the transposed, biased table (4H, V), a gather per output over the tile,
- the activations run over long contiguous runs, which LLVM vectorises (kernels/core/cpu_vector_math.py).
A short last tile repeats its last row and stores only its own.

Each output sums its terms as the per-step kernel does, (wx + bias) + R h_0 + R h_1 + ..., each
product rounded before its addition (no FMA), with the same activations: the results equal the
per-step twin's bit for bit (tests/test_lstm.py).
"""

import llvmlite.ir as ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from eggnog.kernels.core.cpu_vector_math import sigmoid32, tanh32

ROW_TILE = 16  # batch rows a tile advances together: two <8 x float> per output
UNITS = 4  # outputs per micro-kernel call: 4 x 2 accumulators + 2 h vectors + 1 broadcast = 11 ymm

_V8F = ir.VectorType(ir.FloatType(), 8)
_I32 = ir.IntType(32)


@intrinsic
def unit_block_product(typingctx, w, w_at, w_pitch, h, acc, acc_at, size):
    """acc[acc_at + i ROW_TILE + q] += w[w_at + k w_pitch + i] * h[k ROW_TILE + q] for k = 0 .. size - 1
    in order, i < UNITS, q < ROW_TILE; float32 arrays, C-contiguous, offsets in elements."""
    sig = types.void(w, w_at, w_pitch, h, acc, acc_at, size)

    def codegen(context, builder, signature, args):
        intp = context.get_value_type(types.intp)
        wa, ha, aa = (context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 3, 4))
        w_at_, w_pitch_, acc_at_, size_ = (context.cast(builder, args[i], signature.args[i], types.intp)
                                           for i in (1, 2, 5, 6))

        def vector_at(array, index):
            return builder.bitcast(builder.gep(array.data, [index]), _V8F.as_pointer())

        def acc_at(i, half):
            return vector_at(aa, builder.add(acc_at_, ir.Constant(intp, i * ROW_TILE + 8 * half)))

        slots = [[cgutils.alloca_once_value(builder, builder.load(acc_at(i, half), align=4)) for half in (0, 1)]
                 for i in range(UNITS)]
        with cgutils.for_range(builder, size_) as loop:
            h_row = builder.mul(loop.index, ir.Constant(intp, ROW_TILE))
            hv = [builder.load(vector_at(ha, builder.add(h_row, ir.Constant(intp, 8 * half))), align=4)
                  for half in (0, 1)]
            w_row = builder.add(w_at_, builder.mul(loop.index, w_pitch_))
            for i in range(UNITS):
                wi = builder.load(builder.gep(wa.data, [builder.add(w_row, ir.Constant(intp, i))]))
                wb = builder.insert_element(ir.Constant(_V8F, None), wi, ir.Constant(_I32, 0))
                wb = builder.shuffle_vector(wb, wb, ir.Constant(ir.VectorType(_I32, 8), [0] * 8))
                for half in (0, 1):
                    slot = slots[i][half]
                    builder.store(builder.fadd(builder.load(slot), builder.fmul(wb, hv[half])), slot)
        for i in range(UNITS):
            for half in (0, 1):
                builder.store(builder.load(slots[i][half]), acc_at(i, half), align=4)
        return context.get_dummy_value()

    return sig, codegen


@numba.njit(parallel=True, error_model="numpy", cache=True)
def forward_sequence(table_t, rows, rt, c0, hs, cs, gates, keep):
    """table_t (4H, V): wx + bias, transposed; rt (N, D, 4D): R with the gate outputs contiguous per
    input k; c0 (H,); hs (T + 1, B, H) with hs[0] set; cs and gates written when `keep`."""
    steps, batch = rows.shape
    heads, size, width = rt.shape
    hidden = heads * size
    tiles = (batch + ROW_TILE - 1) // ROW_TILE
    plane = size * ROW_TILE
    flat_r = rt.reshape(rt.size)
    for nt in numba.prange(heads * tiles):
        n, b0 = nt // tiles, (nt % tiles) * ROW_TILE
        base = n * size
        valid = min(ROW_TILE, batch - b0)
        acc = np.empty(4 * plane, np.float32)  # [gate][unit][row]
        i_g, f_g, z_g, o_g = acc[:plane], acc[plane:2 * plane], acc[2 * plane:3 * plane], acc[3 * plane:]
        h = np.empty(plane, np.float32)  # [unit][row]: h_{t-1}, then h_t
        c = np.empty(plane, np.float32)
        tile_rows = np.empty(ROW_TILE, np.int64)
        for d in range(size):
            for q in range(ROW_TILE):
                h[d * ROW_TILE + q] = hs[0, b0, base + d]
                c[d * ROW_TILE + q] = c0[base + d]
        for t in range(steps):
            for q in range(ROW_TILE):
                tile_rows[q] = rows[t, b0 + min(q, valid - 1)]
            for g in range(4):
                for d in range(size):
                    column = table_t[g * hidden + base + d]
                    out = acc[(g * size + d) * ROW_TILE:(g * size + d + 1) * ROW_TILE]
                    for q in range(ROW_TILE):
                        out[q] = column[tile_rows[q]]
            for u0 in range(0, width, UNITS):
                unit_block_product(flat_r, (n * size) * width + u0, width, h, acc, u0 * ROW_TILE, size)
            for e in range(plane):
                i_g[e] = sigmoid32(i_g[e])
            for e in range(plane):
                f_g[e] = sigmoid32(f_g[e])
            for e in range(plane):
                z_g[e] = tanh32(z_g[e])
            for e in range(plane):
                o_g[e] = sigmoid32(o_g[e])
            for e in range(plane):
                c[e] = f_g[e] * c[e] + i_g[e] * z_g[e]
            for e in range(plane):
                h[e] = o_g[e] * tanh32(c[e])
            for q in range(valid):
                for d in range(size):
                    hs[t + 1, b0 + q, base + d] = h[d * ROW_TILE + q]
            if keep:
                for q in range(valid):
                    for d in range(size):
                        cs[t + 1, b0 + q, base + d] = c[d * ROW_TILE + q]
                        for g in range(4):
                            gates[t, b0 + q, g * hidden + base + d] = acc[(g * size + d) * ROW_TILE + q]
