"""``noisydml-report MY_RUN --against results/<reproduction>`` on rows, without training: a run of no
experiment is refused in one line naming the board's experiment that matches its data set and noise."""

from __future__ import annotations

from pathlib import Path

import pytest

from noisydml.report.against import place
from noisydml.report.board import read_runs
from noisydml.report.records import COMPLETE, Run

ROOT = Path(__file__).resolve().parent.parent
BOARD = ROOT / "results" / "noisy_dml_cpu"


def plain_run(dataset: str, noise: str, rate: str = "0.2") -> tuple[Run, dict[str, str]]:
    """A finished run of no experiment (``noisydml trainer.max_epochs=1``) and its row."""
    run = Run(Path("/runs/mine"), COMPLETE, {"trainer.max_epochs": 1}, choices={"noise": noise})
    row = {
        "experiment": "",
        "dataset": dataset,
        "method": "",
        "noise": noise,
        "noise_rate": rate,
        "seed": "0",
    }
    return run, row


@pytest.mark.parametrize(
    ("noise", "experiment"),
    [("uniform", "noisy_dml/digits_symmetric"), ("small_cluster", "noisy_dml/digits_small_cluster")],
)
def test_a_run_of_no_experiment_is_told_the_board_experiment_of_its_noise(
    noise: str, experiment: str
) -> None:
    run, row = plain_run("digits", noise)
    with pytest.raises(ValueError) as refused:
        place([run], [row], read_runs(BOARD))
    message = str(refused.value)
    assert "\n" not in message and "ran under no experiment=" in message
    assert message.endswith(f"on digits with {noise} noise: experiment={experiment}")


def test_a_run_the_board_has_no_experiment_for_is_told_so_and_given_them_all() -> None:
    run, row = plain_run("mnist1d", "uniform")
    with pytest.raises(ValueError) as refused:
        place([run], [row], read_runs(BOARD))
    message = str(refused.value)
    assert "\n" not in message and "holds no run on mnist1d with uniform noise" in message
    assert message.endswith(
        "experiment=noisy_dml/digits_small_cluster or experiment=noisy_dml/digits_symmetric"
    )


def test_the_board_experiment_is_chosen_by_data_set_before_noise() -> None:
    rows = [
        {"experiment": e, "dataset": d, "method": "m", "noise": n, "noise_rate": "0.2", "seed": "0"}
        for e, d, n in (("b/other_data", "cars", "uniform"), ("a/same_data", "digits", "pair"))
    ]
    run, row = plain_run("digits", "uniform")
    with pytest.raises(ValueError) as refused:
        place([run], [row], rows)
    assert str(refused.value).endswith(
        "the board holds no run on digits with uniform noise; run it under the board's experiment on digits "
        "(with pair noise): experiment=a/same_data"
    )
