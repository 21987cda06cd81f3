"""The simulation chart: bars side by side with the legend's colours, and every bar labelled,
so a class that waited a second is as readable as one that waited an hour."""

from __future__ import annotations

from typing import Any

import pytest
from matplotlib.colors import to_rgba
from matplotlib.patches import Rectangle

from rayquota.simulation.chart import chart, seconds_label


def waits(mean: float, p50: float, p90: float, p99: float) -> dict[str, float]:
    return {"mean": mean, "p50": p50, "p90": p90, "p99": p99}


REPORT: dict[str, Any] = {
    "scenario": "s",
    "makespan_s": 4000.0,
    "capacity_bound_s": 3900.0,
    "preemptions": 3,
    "workloads": 60,
    "utilisation_mean": {"nvidia.com/gpu": 0.9},
    "timeline": [
        {"t": 0.0, "pending": 0, "utilisation": {"nvidia.com/gpu": 0.5}},
        {"t": 10.0, "pending": 4, "utilisation": {"nvidia.com/gpu": 1.0}},
    ],
    "classes": {
        "experiment": {"wait_s": waits(1658.0, 1770.0, 2837.0, 2957.0), "preemptions": 3},
        "production": {"wait_s": waits(1.0, 0.0, 2.0, 2.0), "preemptions": 0},
    },
    "queues": {
        "team-a": {"wait_s": waits(2333.0, 2000.0, 3510.0, 3600.0)},
        "team-b": {"wait_s": waits(1015.0, 900.0, 1785.0, 1900.0)},
    },
}


def bars(ax: Any) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


@pytest.fixture
def panels() -> Any:
    import matplotlib.pyplot as plt

    fig = chart(REPORT)
    yield fig.axes
    plt.close(fig)


def test_per_queue_mean_and_p90_bars_stand_side_by_side_in_the_legends_colours(panels: Any) -> None:
    ax = panels[3]
    drawn = bars(ax)
    assert len(drawn) == 4
    for a in drawn:
        assert a.get_alpha() in (None, 1.0)
        for b in drawn:
            if a is not b:
                low_a, high_a = a.get_y(), a.get_y() + a.get_height()
                low_b, high_b = b.get_y(), b.get_y() + b.get_height()
                assert high_a <= low_b + 1e-9 or high_b <= low_a + 1e-9, "two bars drawn over each other"
    legend = ax.get_legend()
    labels = [t.get_text() for t in legend.get_texts()]
    assert sorted(labels) == ["mean", "p90"]
    for handle, label in zip(legend.legend_handles, labels, strict=True):
        value = {"mean": 2333.0, "p90": 3510.0}[label]
        (bar,) = [b for b in drawn if abs(b.get_width() - value) < 1e-9]
        assert to_rgba(bar.get_facecolor()) == to_rgba(handle.get_facecolor())


def test_every_class_bar_is_labelled_even_a_one_second_wait(panels: Any) -> None:
    ax = panels[2]
    labels = [t.get_text() for t in ax.texts]
    assert len(labels) == len(bars(ax)) == 6
    assert labels.count("2") == 2 and "0" in labels and "2,837" in labels
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert any("production" in t and "mean 1 s" in t for t in ticks)


def test_seconds_labels() -> None:
    assert [seconds_label(v) for v in (0.0, 1.0, 1.25, 9.96, 42.4, 2837.0)] == [
        "0",
        "1",
        "1.2",
        "10",
        "42",
        "2,837",
    ]
