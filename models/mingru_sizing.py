"""MinGRU LM sizing from a parameter budget, as gruboros solves it.

Sizes take binary suffixes (k, m, g = 1024^n). The budget is approximated by
P ~ depth (3e + 2f) d^2 + 2 * 256 d (minGRU 3e d^2, feed-forward 2f d^2, embedding and head):
- dim and depth given: used as they are;
- dim only: depth = round((P - 512 d) / ((3e + 2f) d^2));
- depth only: d solves the quadratic, rounded to a multiple of 64;
- neither: d_guess = round64(base (P / scale)^0.25) with (base, scale) = (512, 1e8) below 1e9 and
  (1024, 1e9) above; depth from d_guess, then d re-solved from that depth.
"""

import math
import re

from eggnog.runtime.errors import BadInput

_SUFFIX = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: object, name: str = "size") -> int:
    """'1g' -> 1073741824, '100k' -> 102400, '2048' -> 2048."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgKMG]?)\s*", str(text))
    if not match:
        raise BadInput(f"--{name} {text!r} is not a size (a number with an optional k, m or g suffix)")
    value = int(float(match.group(1)) * _SUFFIX[match.group(2).lower()])
    if value < 1:
        raise BadInput(f"--{name} must be positive, got {text!r}")
    return value


def _round64(x: float) -> int:
    return int(round(x / 64.0)) * 64


def _per_layer(expansion: float, ff_mult: float) -> float:
    return 3.0 * expansion + 2.0 * ff_mult


def _depth_for(params: int, dim: int, expansion: float, ff_mult: float) -> int:
    return int(round((params - 512 * dim) / (_per_layer(expansion, ff_mult) * dim * dim)))


def _dim_for(params: int, depth: int, expansion: float, ff_mult: float) -> int:
    a = depth * _per_layer(expansion, ff_mult)
    return _round64((-512 + math.sqrt(512 * 512 + 4 * a * params)) / (2 * a))


def solve_dims(params: int | None = None, dim: int | None = None, depth: int | None = None, expansion: float = 1.5,
               ff_mult: float = 4.0) -> tuple[int, int]:
    """(dim, depth) for a parameter budget; raises BadInput when the budget cannot be met."""
    for name, value in (("dim", dim), ("depth", depth), ("expansion-factor", expansion), ("ff-mult", ff_mult)):
        if value is not None and value <= 0:
            raise BadInput(f"--{name} must be positive, got {value}")
    if dim is not None and depth is not None:
        return int(dim), int(depth)
    if params is None:
        raise BadInput("give --params, or both --dim and --depth")
    if dim is not None:
        depth = _depth_for(params, dim, expansion, ff_mult)
    elif depth is not None:
        dim = _dim_for(params, depth, expansion, ff_mult)
    else:
        base, scale = (512, 1e8) if params < 1e9 else (1024, 1e9)
        guess = max(64, _round64(base * (params / scale) ** 0.25))
        depth = _depth_for(params, guess, expansion, ff_mult)
        if depth >= 1:
            dim = _dim_for(params, depth, expansion, ff_mult)
    if depth is None or depth < 1 or dim is None or dim < 1:
        raise BadInput(f"a budget of {params:,} parameters cannot be met with these settings "
                       f"(it leaves dim {dim}, depth {depth}); raise --params or lower --dim")
    return int(dim), int(depth)
