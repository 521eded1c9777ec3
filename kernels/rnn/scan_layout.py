"""How the CUDA scan (kernels/rnn/scan.py) cuts a (batch, T, channels) sequence into blocks and tiles.

A block owns `width` adjacent channels (a power of two, at most 32) of one batch row over one segment
of time, and walks the segment in tiles of TILE steps: SLOTS threads per channel, each holding STEPS
consecutive steps in registers. A tile is read from HBM once; its per-thread maps are combined in
shared memory and the same registers produce the outputs. When batch * channel groups gives too few
blocks to fill the GPU, T is cut into segments of whole tiles: a fold pass writes each segment's map,
a carry pass (one thread per channel, over segments) turns the maps into each segment's entering state,
and the scan pass starts every segment from it.
"""

STEPS = 8  # consecutive steps of one channel a thread holds in registers
SLOTS = 8  # threads along time per channel in a block (the default; SLOT_VARIANTS are the tuner's)
SLOT_VARIANTS = (4, 8, 16)  # block sizes a launch may take: 8 steps of 4, 8 or 16 slots per channel
TILE = STEPS * SLOTS  # steps a block combines per barrier
LANES = 32  # the most channels a block spans (one warp's worth: 128-byte rows)
BLOCKS_WANTED = 256  # below this many (batch, channel group) blocks, cut T into segments (H100: 132 SMs)
MIN_SEGMENT_TILES = 2  # a segment spans at least this many tiles (its fold re-reads 8 bytes an element)


def channel_width(channels):
    """Channels a block spans: the smallest power of two >= channels, at most LANES."""
    width = 1
    while width < min(channels, LANES):
        width *= 2
    return width


def plan(batch, steps, channels, slots=SLOTS):
    """(threads per block, channel groups per batch row, segments, steps per segment) of one call whose
    blocks run `slots` threads along time per channel (tiles of STEPS * slots steps)."""
    tile = STEPS * slots
    width = channel_width(channels)
    groups = (channels + width - 1) // width
    tiles = max(1, (steps + tile - 1) // tile)
    wanted = (BLOCKS_WANTED + batch * groups - 1) // (batch * groups)
    segments = max(1, min(wanted, tiles // MIN_SEGMENT_TILES))
    per_segment = (tiles + segments - 1) // segments
    return slots * width, groups, (tiles + per_segment - 1) // per_segment, per_segment * tile
