"""What the mutation run mutates, with which operators, and the fast tests that must kill each mutant.

The modules are those where a silent error does the most harm: the ES updates and fitness shaping, the
optimisers and the CPU twins they call, the wire formats, message tags and admission, checkpoints, the
default corpus check, the device counts and the gossip merge. Big modules are restricted to the
functions that compute an update or parse a message (`functions`: names of the innermost enclosing
function or class, as cosmic-ray reports them); the rest of such a module is configuration and plumbing
that other tests cover.

The operators are a selective set (after Offutt et al., "An experimental determination of sufficient
mutant operators", 1996): each arithmetic operator replaced by its inverse, each comparison by its
boundary and its negation, signs, booleans, `and`/`or`, `not`, loop bodies skipped, exception handlers
disabled, and every number literal moved by +-1. Replacing each operator by every other one would give
about five times the mutants for few more distinct faults, and would not fit a run of half an hour on
two cores."""

from dataclasses import dataclass

OPERATORS = tuple("core/" + name for name in (
    "ReplaceBinaryOperator_Add_Sub", "ReplaceBinaryOperator_Sub_Add", "ReplaceBinaryOperator_Mul_Div",
    "ReplaceBinaryOperator_Div_Mul", "ReplaceBinaryOperator_FloorDiv_Mul", "ReplaceBinaryOperator_Mod_FloorDiv",
    "ReplaceBinaryOperator_Pow_Mul", "ReplaceBinaryOperator_LShift_RShift", "ReplaceBinaryOperator_RShift_LShift",
    "ReplaceBinaryOperator_BitAnd_BitOr", "ReplaceBinaryOperator_BitOr_BitAnd", "ReplaceBinaryOperator_BitXor_BitOr",
    "ReplaceComparisonOperator_Eq_NotEq", "ReplaceComparisonOperator_NotEq_Eq",
    "ReplaceComparisonOperator_Lt_LtE", "ReplaceComparisonOperator_Lt_GtE",
    "ReplaceComparisonOperator_LtE_Lt", "ReplaceComparisonOperator_LtE_Gt",
    "ReplaceComparisonOperator_Gt_GtE", "ReplaceComparisonOperator_Gt_LtE",
    "ReplaceComparisonOperator_GtE_Gt", "ReplaceComparisonOperator_GtE_Lt",
    "ReplaceComparisonOperator_Is_IsNot", "ReplaceComparisonOperator_IsNot_Is",
    "ReplaceUnaryOperator_USub_UAdd", "ReplaceUnaryOperator_Delete_Not", "AddNot",
    "ReplaceTrueWithFalse", "ReplaceFalseWithTrue", "ReplaceAndWithOr", "ReplaceOrWithAnd",
    "ReplaceBreakWithContinue", "ReplaceContinueWithBreak", "ZeroIterationForLoop", "ExceptionReplacer",
    "NumberReplacer",
))


@dataclass(frozen=True)
class Target:
    path: str  # relative to the repository root
    tests: tuple  # test files or node ids
    keyword: str = ""  # pytest -k over all of `tests` (a file's name matches all its tests)
    functions: tuple = ()  # empty: every function of the module
    area: str = ""
    env: tuple = ()  # (name, value) pairs set for the module's tests


# The optimisers' element steps run as plain Python (the CPU twins' bodies unjitted, one float32 operation at a
# time as numba runs them): a mutant then costs no parallel compile, which would be most of its time.
UNJITTED = (("NUMBA_DISABLE_JIT", "1"),)


LEARNING_ES = "tests/test_learning_direction_es.py"
EDGES = "tests/test_fitness_shaping_edges.py"
WIRE = "tests/test_wire_edges.py"

TARGETS = (
    Target("evolution/fitness.py", ("tests/test_fitness.py", EDGES), area="ES fitness shaping"),
    Target("evolution/coordinator/chunk_shaping.py",
           (EDGES, "tests/test_coordinator.py::test_chunk_shaping_follows_d_eggs"), area="ES fitness shaping"),
    Target("evolution/int_optimizers.py",
           ("tests/test_quantized_adamw_update.py", LEARNING_ES, "tests/test_strategy.py", "tests/test_es_training.py"),
           keyword="quantized_adamw_update or egg-settings0 or int_eggroll or resume_equals_uninterrupted_run",
           area="ES updates"),
    Target("evolution/eggroll.py", ("tests/test_es_update_schedule.py", LEARNING_ES, "tests/test_es_tell_on_device.py"),
           keyword="es_update_schedule or egg-settings0 or es_tell_on_device",
           functions=("lr_at", "alpha_at", "threshold_at", "noise_epoch", "tell"), area="ES updates"),
    Target("evolution/float_eggroll.py", ("tests/test_float_eggroll.py", LEARNING_ES),
           keyword="float_eggroll_lowers or formula or zscore", functions=("zscore_fitness", "gradient", "tell"),
           area="ES updates"),
    Target("kernels/egg/int_update.py", ("tests/test_int_update.py", "tests/test_int_update_twin.py"),
           functions=("gate_bound", "_cpu_noise_rows", "_cpu_matrix", "_cpu_vector", "cpu_int_update", "cpu_int_vote"),
           area="ES updates"),
    Target("kernels/optim/quantized_adamw.py", ("tests/test_quantized_adamw_rule.py", "tests/test_kernel_ops.py"),
           keyword="quantized_adamw",
           functions=("_scalars", "_update", "_cpu_all", "cpu_quantized_adamw_"), area="ES updates"),
    Target("training/optimizers.py", ("tests/test_optim.py", "tests/test_optimizer_defaults.py"), keyword="not device",
           area="optimisers",
           env=UNJITTED),
    Target("kernels/optim/float_steps.py", ("tests/test_optim.py", "tests/test_optimizer_defaults.py"),
           keyword="not device",
           functions=("_adamw_scalars", "_sf_scalars", "sgd", "adamw", "sf_adamw", "evaluate", "cpu_sf_adamw_eval"),
           area="optimisers", env=UNJITTED),
    Target("evolution/coordinator/wire.py", ("tests/test_coordinator.py", WIRE),
           functions=("encode", "header", "payload", "kind"), area="TCP wire and tags"),
    Target("training/gossip/tcp_wire.py",
           ("tests/test_gossip_tcp.py::test_the_wire_format_round_trips_and_refuses_what_does_not_add_up", WIRE,
            "tests/test_gossip_wire_limits.py"),
           area="TCP wire and tags"),
    Target("runtime/auth.py", ("tests/test_coordinator_tcp.py", WIRE, "tests/test_gossip_wire_limits.py"),
           keyword="token_comes_from or configuration_hash_covers or wire_edges or wire_limits",
           area="TCP wire and tags"),
    Target("runtime/secure_socket.py", ("tests/test_secure_socket.py", WIRE),
           functions=("_derive", "derive_keys", "callback", "message_key", "seal", "opened"), area="TCP wire and tags"),
    Target("evolution/coordinator/messages.py",
           ("tests/test_coordinator_messages.py", "tests/test_coordinator_message_limits.py"),
           area="TCP wire and tags"),
    Target("training/gossip/messages.py", ("tests/test_gossip_messages.py", "tests/test_gossip_message_limits.py"),
           area="TCP wire and tags"),
    Target("runtime/checkpoint.py", ("tests/test_runtime.py", "tests/test_checkpoint_files.py"),
           area="checkpoints"),
    Target("corpus/default.py",
           ("tests/test_default_corpus_checks.py", "tests/test_default_corpus.py::test_cache_dir_from_environment"),
           area="default corpus check"),
    Target("kernels/core/device_counts.py", ("tests/test_device_counts.py", "tests/test_device_trace_edges.py"),
           area="device counts"),
    Target("training/gossip/merge.py", ("tests/test_gossip_snapshot_edges.py", "tests/test_gossip.py", LEARNING_ES),
           keyword="snapshot_edges or snapshot_crosses or merges_on_the_loser or rejuvenation or tournament_moves",
           area="gossip merge"),
)
