"""ops_for builds a backend's namespace once (models ask for it on every loss call) and again only after
an op was registered."""

from eggnog.kernels.core.registry import OPS, Op, ops_for


def test_a_backend_is_built_once_and_again_after_a_registration(monkeypatch):
    first = ops_for("cpu")
    assert ops_for("cpu") is first and ops_for("numpy") is not first
    probe = Op("zz_probe", __name__, numpy=lambda x: x, cpu=lambda x: x + 1, cuda=lambda x: x + 2)
    monkeypatch.setitem(OPS, "zz_probe", probe)
    again = ops_for("cpu")
    assert again is not first and again.zz_probe(3) == 4 and ops_for("cpu") is again
    monkeypatch.undo()
    assert not hasattr(ops_for("cpu"), "zz_probe")
