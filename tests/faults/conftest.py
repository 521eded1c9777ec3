"""Shared by the fault cases: the tiny corpus, and the final parameters of the synchronous trainer on
the cases' run, which every disturbed run must reproduce bit for bit."""

import pytest

from bench.faults.tcp import reference_for
from tests.es_helpers import tiny_corpus


@pytest.fixture(scope="module")
def fault_corpus(tmp_path_factory):
    return tiny_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def reference(tmp_path_factory, fault_corpus):
    return reference_for(tmp_path_factory.mktemp("reference"), fault_corpus)
