"""Fair sharing's settings as the operator reads them (Kueue's Configuration ``fairSharing``)."""

from __future__ import annotations

import pytest

from rayquota.operator.queue.admission.admission_loop import fair_sharing_from_env
from rayquota.queueing.fairsharing import FairSharing, PreemptionStrategy

STRATEGIES = "RAYQUOTA_FAIR_SHARING_PREEMPTION_STRATEGIES"


def test_off_unless_asked() -> None:
    assert fair_sharing_from_env({}) is None
    assert fair_sharing_from_env({"RAYQUOTA_FAIR_SHARING": "false"}) is None


def test_on_with_kueues_default_strategies() -> None:
    assert fair_sharing_from_env({"RAYQUOTA_FAIR_SHARING": "true"}) == FairSharing()


def test_strategies_are_read_in_kueues_words() -> None:
    found = fair_sharing_from_env({"RAYQUOTA_FAIR_SHARING_PREEMPTION_STRATEGIES": "LessThanInitialShare"})
    assert found is not None
    assert found.preemption_strategies == (PreemptionStrategy.LESS_THAN_INITIAL_SHARE,)


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"RAYQUOTA_FAIR_SHARING": "maybe"}, "RAYQUOTA_FAIR_SHARING='maybe'"),
        (
            {STRATEGIES: "LessThanInitialShare,LessThanOrEqualToFinalShare"},
            f"{STRATEGIES}='LessThanInitialShare,LessThanOrEqualToFinalShare'",
        ),
        ({STRATEGIES: "Fairest"}, "unknown strategy 'Fairest'"),
    ],
)
def test_a_bad_value_names_its_variable(env: dict[str, str], words: str) -> None:
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        fair_sharing_from_env(env)
