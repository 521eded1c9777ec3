"""One name for one thing across the trainers: the width and depth flags (with nano-egg's names as
aliases), the step time in every run's metrics, help examples that read as typed, and the docs naming the
defaults the code has."""

import re

import pytest

from eggnog.training.gossip.fields import GossipFields
from tests.helpers import ROOT, run_script

TRAINERS = ("train_es.py", "train_bptt.py", "train_gossip.py", "train_rge.py")
EXAMPLE = re.compile(r"^\s*(python|mpiexec|srun|sbatch)\b")


@pytest.fixture(scope="module")
def helps():
    texts = {}
    for script in TRAINERS:
        result = run_script(script, "--help", env={"COLUMNS": "120"})
        assert result.returncode == 0, result.stderr
        texts[script] = result.stdout
    return texts


@pytest.mark.parametrize("script", TRAINERS)
def test_every_trainer_takes_the_width_and_depth_under_both_names(helps, script):
    assert "--dim, --n-embd" in helps[script] and "--depth, --n-layer" in helps[script]


@pytest.mark.parametrize("script", TRAINERS)
def test_help_examples_are_lines_as_typed_not_joined_continuations(helps, script):
    examples = [line for line in helps[script].splitlines() if EXAMPLE.match(line)]
    assert examples, f"{script}'s help shows no example"
    joined = [line for line in examples if re.search(r"\S {3,}-", line)]
    assert not joined, joined


def test_the_cluster_docs_name_the_gossip_merge_default_the_code_has():
    text = open(f"{ROOT}/docs/cluster.md").read()
    named = re.findall(r"`--gossip-merge (\w+)`, the default", text)
    assert named == [GossipFields.__dataclass_fields__["gossip_merge"].default], named
