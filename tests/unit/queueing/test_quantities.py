import pytest

from rayquota.queueing import QuantityError, format_quantity, parse_quantity


@pytest.mark.parametrize(
    ("text", "milli"),
    [
        ("500m", 500),
        ("1.5", 1500),
        ("4Gi", 4 * 2**30 * 1000),
        ("1e3", 1_000_000),
        ("2Ki", 2048 * 1000),
        ("0.5Gi", 2**29 * 1000),
        ("16", 16_000),
        ("1k", 1_000_000),
        ("100M", 100 * 10**6 * 1000),
        ("1E-3", 1),
        (".5", 500),
        ("+2", 2000),
        (3, 3000),
        ("0", 0),
    ],
)
def test_parses_exactly(text: str | int, milli: int) -> None:
    assert parse_quantity(text) == milli


def test_fractions_of_a_milli_unit_round_up() -> None:
    assert parse_quantity("1u") == 1
    assert parse_quantity("0.0001") == 1


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5 Gi", "1Gb", "--1", "-1", "1e", "Gi"])
def test_malformed_quantity_error_names_the_value(bad: str) -> None:
    with pytest.raises(QuantityError) as excinfo:
        parse_quantity(bad)
    assert repr(bad) in str(excinfo.value)


def test_format_is_human() -> None:
    assert format_quantity(16_000, "nvidia.com/gpu") == "16"
    assert format_quantity(500, "cpu") == "500m"
    assert format_quantity(4 * 2**30 * 1000, "memory") == "4Gi"
    assert format_quantity(1000, "memory") == "1"


def test_sum_and_difference_stay_exact() -> None:
    parts = [parse_quantity(q) for q in ("0.1", "0.2", "0.3", "100m", "1.7")]
    total = sum(parts)
    assert total == parse_quantity("2.4")
    for p in parts:
        total -= p
    assert total == 0
