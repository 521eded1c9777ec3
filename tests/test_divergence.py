"""The divergence guard: a finite loss far past its start stops the run with one sentence naming the
step and the hint; a loss that falls, wobbles or starts high goes on."""

import math

import pytest

from eggnog.runtime.divergence import DivergenceGuard
from eggnog.runtime.errors import BadInput
from tests.helpers import assert_user_error, run_script


def feed(guard, losses):
    for step, loss in enumerate(losses, 1):
        guard.check(loss, step)


def test_falling_or_wobbling_losses_go_on(tmp_path):
    feed(DivergenceGuard(tmp_path, "lower --lr"), [8.0 - 0.01 * i for i in range(300)])
    feed(DivergenceGuard(tmp_path, "lower --lr"), [5.0, 9.0, 15.0, 4.0] * 50)  # means stay under 4 x 5


def test_a_growing_loss_stops_at_the_window_that_passes_the_factor(tmp_path):
    guard = DivergenceGuard(tmp_path, "lower --lr")
    losses = [7.0] * 5 + [7.0 * 2 ** i for i in range(1, 20)]
    with pytest.raises(BadInput, match=r"diverged: .* more than 4 times its start \(7\) at step 10; lower --lr "
                                       r"\(nothing was saved\)"):
        feed(guard, losses)


def test_a_non_finite_loss_stops_at_once(tmp_path):
    with pytest.raises(BadInput, match="became nan at step 2"):
        feed(DivergenceGuard(tmp_path, "lower --lr"), [3.0, math.nan])


def test_the_zero_order_run_of_the_report_stops_instead_of_running_on(tmp_path):
    result = run_script("train_rge.py", "--model", "dnc", "--overfit", "--lr", "0.3", "--epsilon", "0.01",
                        "--steps", "150", "--run-dir", tmp_path / "r")
    assert_user_error(result, "the training loss diverged", "lower --lr or --sigma")
