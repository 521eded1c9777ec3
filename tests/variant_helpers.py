"""What the launch-variant tests share: a spy on which kernel a launch took, and a tuning file of the
test's own that launches then read."""

from eggnog.kernels.core import tuning


class Spy:
    """A kernel that notes its name in `seen` before launching."""

    def __init__(self, name, compiled, seen):
        self._name, self._compiled, self._seen = name, compiled, seen

    def __getitem__(self, config):
        self._seen.append(self._name)
        return self._compiled[config]


def own_tuning_file(tmp_path, monkeypatch):
    """Point the tuning file at tmp_path (tuning on); returns record(kernel, problem, variant)."""
    path = tmp_path / tuning.FILE
    monkeypatch.setattr(tuning, "tuning_path", lambda folder=None: str(path))
    monkeypatch.delenv(tuning.ENV, raising=False)
    return lambda kernel, problem, variant: tuning.record(kernel, tuning.device_name(), problem, variant)
