"""128-bit (and 64-bit) loads and stores of 4-byte elements (int32 or float32), as CUDA device functions.

    w0, w1, w2, w3 = load_global_v4(words, index)      # words[index:index + 4], 16-byte aligned
    v0, v1, v2, v3 = load_global_v4(matrix, row, col)  # matrix[row, col:col + 4] (any number of indices)
    w0, w1, w2, w3 = load_shared_v4(words, index)      # the same from a shared array (one LDS.128)
    v0, v1 = load_shared_v2(values, index)             # values[index:index + 2] (one LDS.64)
    store_shared_f32x4(values, index, v0, v1, v2, v3)  # values[index:index + 4] = ... (one STS.128)
    store_global_f32x4(values, index, v0, v1, v2, v3)  # the same in a global array (one STG.128)
    w0, w1, w2, w3 = load_global_rw_v4(words, index)   # words[index:index + 4] of memory the kernel also
                                                       # writes: coherent, ordered with its stores (LDG.128)
    w = load_global_s32(bytes_, base, offset)          # the int32 at byte base + offset of an int8 array the
                                                       # kernel may write (base int64, offset int32, 4-aligned)
    store_global_s32(bytes_, base, offset, w)          # the same, stored (STG)

More in docs/internals.md (kernels/core/loads.py)."""

import numpy as np

from eggnog.kernels.core.cuda_api import SIMULATED


def _simulated_load(n):
    def load(array, *index):
        *outer, i = index
        return tuple(array[tuple(outer) + (i + k,)] for k in range(n))
    return load


simulated_load_v2, simulated_load_v4 = _simulated_load(2), _simulated_load(4)


def simulated_store_4(values, index, v0, v1, v2, v3):
    values[index], values[index + 1], values[index + 2], values[index + 3] = v0, v1, v2, v3


def simulated_load_s32(array, base, offset):
    i = int(base) + int(offset)
    assert i % 4 == 0, "a 32-bit access must be 4-byte aligned"
    return np.int32(sum((int(array[i + k]) & 0xFF) << (8 * k) for k in range(3)) | (int(array[i + 3]) << 24))


def simulated_store_s32(array, base, offset, w):
    i = int(base) + int(offset)
    assert i % 4 == 0, "a 32-bit access must be 4-byte aligned"
    for k in range(4):
        array[i + k] = np.uint8((int(w) >> (8 * k)) & 0xFF).view(np.int8)


def _build_intrinsics():
    from llvmlite import ir
    from numba import types
    from numba.cuda import cgutils
    from numba.cuda.cgutils import get_item_pointer
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)

    def element_pointer(context, builder, signature, args):
        array_type = signature.args[0]
        array, idx = args[:2]
        ary = context.make_array(array_type)(context, builder, value=array)
        return get_item_pointer(context, builder, array_type, ary, [idx], wraparound=False)

    @intrinsic
    def load_global_v4(typingctx, array, *index):
        """ld.global.nc.v4: array[..., i:i + 4] of a read-only array of 4-byte elements (int32 or float32),
        16-byte aligned by the caller; no negative-index wraparound."""
        element = array.dtype
        sig = types.UniTuple(element, 4)(array, types.StarArgTuple.from_types(index))

        def codegen(context, builder, signature, args):
            ary = context.make_array(signature.args[0])(context, builder, value=args[0])
            indices = [context.cast(builder, v, t, types.int64)
                       for v, t in zip(cgutils.unpack_tuple(builder, args[1]), signature.args[1])]
            pointer = get_item_pointer(context, builder, signature.args[0], ary, indices, wraparound=False)
            kind = "f32" if element == types.float32 else "u32"
            value_type = context.get_value_type(element)
            fnty = ir.FunctionType(ir.LiteralStructType([value_type] * 4), [pointer.type])
            reg = "f" if element == types.float32 else "r"
            call = builder.call(ir.InlineAsm(fnty, f"ld.global.nc.v4.{kind} {{$0,$1,$2,$3}}, [$4];",
                                             ",".join([f"={reg}"] * 4) + ",l"), [pointer])
            values = [builder.extract_value(call, i) for i in range(4)]
            return context.make_tuple(builder, signature.return_type, values)

        return sig, codegen

    def vector_store(addrspace):
        """values[index:index + 4] = v0..v3 in a float32 array of that address space as one 16-byte
        store (STS.128 / STG.128), 16-byte aligned by the caller."""

        @intrinsic
        def store(typingctx, values, index, v0, v1, v2, v3):
            sig = types.none(values, types.int64, types.float32, types.float32, types.float32, types.float32)

            def codegen(context, builder, signature, args):
                f32 = ir.FloatType()
                ptr = builder.addrspacecast(element_pointer(context, builder, signature, args[:2]),
                                            ir.PointerType(f32, addrspace=addrspace))
                vector = ir.Constant(ir.VectorType(f32, 4), ir.Undefined)
                for k, v in enumerate(args[2:]):
                    vector = builder.insert_element(vector, v, ir.Constant(i32, k))
                builder.store(vector, builder.bitcast(ptr, ir.PointerType(ir.VectorType(f32, 4), addrspace=addrspace)),
                              align=16)
                return context.get_dummy_value()

            return sig, codegen

        return store

    def vector_load(n, addrspace):
        """values[index:index + n] of an array of 4-byte elements in that address space (3: shared, LDS.64 /
        LDS.128; 1: global, LDG.128, coherent and ordered with the kernel's own stores, unlike
        load_global_v4) as one 4n-byte load, 4n-byte aligned by the caller (the compiler cannot prove the
        alignment by itself); no negative-index wraparound."""

        @intrinsic
        def load(typingctx, values, index):
            sig = types.UniTuple(values.dtype, n)(values, types.int64)

            def codegen(context, builder, signature, args):
                element = context.get_value_type(signature.args[0].dtype)
                ptr = builder.addrspacecast(element_pointer(context, builder, signature, args),
                                            ir.PointerType(element, addrspace=addrspace))
                vector = builder.load(builder.bitcast(ptr, ir.PointerType(ir.VectorType(element, n),
                                                                          addrspace=addrspace)), align=4 * n)
                values_n = [builder.extract_element(vector, ir.Constant(i32, k)) for k in range(n)]
                return context.make_tuple(builder, signature.return_type, values_n)

            return sig, codegen

        return load

    def word_pointer(context, builder, array_type, array, base, offset):
        """The global address of the int32 at byte base + offset (int64 + zero-extended int32) of an int8
        array: one 64-bit add; no bounds or wraparound checks."""
        ary = context.make_array(array_type)(context, builder, value=array)
        byte = builder.add(base, builder.zext(offset, ir.IntType(64)))
        pointer = builder.gep(builder.bitcast(ary.data, ir.PointerType(ir.IntType(8))), [byte])
        return builder.addrspacecast(builder.bitcast(pointer, ir.PointerType(i32)), ir.PointerType(i32, addrspace=1))

    @intrinsic
    def load_global_s32(typingctx, array, base, offset):
        sig = types.int32(array, types.int64, types.int32)

        def codegen(context, builder, signature, args):
            return builder.load(word_pointer(context, builder, signature.args[0], *args), align=4)

        return sig, codegen

    @intrinsic
    def store_global_s32(typingctx, array, base, offset, w):
        sig = types.none(array, types.int64, types.int32, types.int32)

        def codegen(context, builder, signature, args):
            builder.store(args[3], word_pointer(context, builder, signature.args[0], *args[:3]), align=4)
            return context.get_dummy_value()

        return sig, codegen

    return (load_global_v4, vector_load(2, 3), vector_load(4, 3), vector_store(3), vector_store(1), load_global_s32,
            store_global_s32, vector_load(4, 1))


if SIMULATED:
    load_global_v4, store_shared_f32x4, store_global_f32x4 = simulated_load_v4, simulated_store_4, simulated_store_4
    load_shared_v2, load_shared_v4 = simulated_load_v2, simulated_load_v4
    load_global_s32, store_global_s32, load_global_rw_v4 = simulated_load_s32, simulated_store_s32, simulated_load_v4
else:
    (load_global_v4, load_shared_v2, load_shared_v4, store_shared_f32x4, store_global_f32x4, load_global_s32,
     store_global_s32, load_global_rw_v4) = _build_intrinsics()


def simulated_copy_async(n):
    def copy(shared, index, matrix, row, col, full):
        for k in range(n):
            shared[index + k] = matrix[row, col + k] if full else 0
    return copy


def simulated_load_shared_tf32_v2(values, index):
    bits = np.array([values[index], values[index + 1]], np.float32).view(np.uint32) + np.uint32(0x1000)
    return tuple(np.float32(v) for v in bits.view(np.float32))


def simulated_copy_async_commit():
    pass


def simulated_copy_async_wait(n):
    pass


def _build_async_copies():
    from llvmlite import ir
    from numba import types
    from numba.cuda.cgutils import get_item_pointer
    from numba.cuda.extending import intrinsic

    i32 = ir.IntType(32)

    def copy_async(nbytes, cache):
        """cp.async.{cache} of nbytes from matrix[row, col] to shared[index], src-size 0 (zero fill) where
        not full."""

        @intrinsic
        def copy(typingctx, shared, index, matrix, row, col, full):
            sig = types.none(shared, types.int64, matrix, types.int64, types.int64, types.boolean)

            def codegen(context, builder, signature, args):
                shared_type, _, matrix_type = signature.args[:3]
                target = get_item_pointer(context, builder, shared_type, context.make_array(shared_type)(
                    context, builder, value=args[0]), [args[1]], wraparound=False)
                source = get_item_pointer(context, builder, matrix_type, context.make_array(matrix_type)(
                    context, builder, value=args[2]), list(args[3:5]), wraparound=False)
                element = target.type.pointee
                target = builder.ptrtoint(builder.addrspacecast(target, ir.PointerType(element, addrspace=3)), i32)
                source = builder.addrspacecast(source, ir.PointerType(source.type.pointee, addrspace=1))
                size = builder.select(context.cast(builder, args[5], types.boolean, types.boolean),
                                      ir.Constant(i32, nbytes), ir.Constant(i32, 0))
                fnty = ir.FunctionType(ir.VoidType(), [i32, source.type, i32])
                asm = f"cp.async.{cache}.shared.global [$0], [$1], {nbytes}, $2;"
                builder.call(ir.InlineAsm(fnty, asm, "r,l,r,~{memory}", side_effect=True), [target, source, size])
                return context.get_dummy_value()

            return sig, codegen

        return copy

    def statement(asm):
        fnty = ir.FunctionType(ir.VoidType(), [])
        return lambda builder: builder.call(ir.InlineAsm(fnty, asm, "~{memory}", side_effect=True), [])

    @intrinsic
    def copy_async_commit(typingctx):
        def codegen(context, builder, signature, args):
            statement("cp.async.commit_group;")(builder)
            return context.get_dummy_value()

        return types.none(), codegen

    @intrinsic
    def copy_async_wait(typingctx, n):
        if not isinstance(n, types.IntegerLiteral):
            return None  # typed again with the literal

        def codegen(context, builder, signature, args):
            statement(f"cp.async.wait_group {n.literal_value};")(builder)
            return context.get_dummy_value()

        return types.none(n), codegen

    @intrinsic
    def load_shared_tf32_v2(typingctx, values, index):
        sig = types.UniTuple(types.float32, 2)(values, types.int64)

        def codegen(context, builder, signature, args):
            array = context.make_array(signature.args[0])(context, builder, value=args[0])
            pointer = get_item_pointer(context, builder, signature.args[0], array, [args[1]], wraparound=False)
            pair = ir.VectorType(i32, 2)
            pointer = builder.bitcast(builder.addrspacecast(pointer, ir.PointerType(pointer.type.pointee, addrspace=3)),
                                      ir.PointerType(pair, addrspace=3))
            bits = builder.add(builder.load(pointer, align=8), ir.Constant(pair, [0x1000, 0x1000]))
            values_2 = [builder.bitcast(builder.extract_element(bits, ir.Constant(i32, k)), ir.FloatType())
                        for k in range(2)]
            return context.make_tuple(builder, signature.return_type, values_2)

        return sig, codegen

    return copy_async(16, "cg"), copy_async(4, "ca"), copy_async_commit, copy_async_wait, load_shared_tf32_v2


if SIMULATED:
    copy_async_v4, copy_async_f32 = simulated_copy_async(4), simulated_copy_async(1)
    copy_async_commit, copy_async_wait = simulated_copy_async_commit, simulated_copy_async_wait
    load_shared_tf32_v2 = simulated_load_shared_tf32_v2
else:
    copy_async_v4, copy_async_f32, copy_async_commit, copy_async_wait, load_shared_tf32_v2 = _build_async_copies()
