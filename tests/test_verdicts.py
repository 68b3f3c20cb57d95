"""The one rule for a paired comparison (fp16lab.labs.runtime.verdicts), with pandas' median as the oracle."""

import math

import pandas as pd
import pytest

from fp16lab.labs.runtime.verdicts import paired_verdict


@pytest.mark.parametrize(("values", "verdict"), [
    ([1.10, 1.20, 1.15], "faster"),                    # every round above 1, by more than the spread
    ([0.80, 0.90, 0.85], "slower"),
    ([1.02, 1.05, 1.04], "faster"),                    # real and small is still a side, not a tie
    ([0.95, 1.20, 1.10], "tie (inside the spread)"),   # one round on the other side
    ([1.01, 1.02, 1.10], "tie (inside the spread)"),   # all above 1, but the median's lead is inside the spread
    ([1.30], "one run: no spread, no verdict"),
])
def test_paired_verdict_names_a_side_only_beyond_the_spread(values: list[float], verdict: str) -> None:
    v = paired_verdict(values, null=1.0, above="faster", below="slower")
    assert v.verdict == verdict and v.n == len(values)
    assert v.median == pd.Series(values).median()
    if len(values) > 1:
        assert v.spread == max(abs(x - v.median) for x in values)
        assert verdict.startswith("tie") or all((x > 1) == (v.median > 1) for x in values)  # a side holds every pair


def test_paired_differences_use_null_zero_and_their_own_words() -> None:
    assert paired_verdict(pd.Series([0.3, 0.2, 0.25]), null=0.0, above="worse", below="better").verdict == "worse"
    assert paired_verdict([-0.3, -0.2, -0.25], null=0.0, above="worse", below="better").verdict == "better"
    assert str(paired_verdict([1.2, 1.3], null=1.0, above="faster", below="slower")).endswith("over 2 pairs: faster")


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"values": []}, "values"),
    ({"values": [1.0, math.nan]}, "values"),
    ({"values": "1.2"}, "values"),
    ({"null": math.inf}, "null"),
    ({"null": True}, "null"),
    ({"above": ""}, "above"),
    ({"below": None}, "below"),
])
def test_paired_verdict_refuses_bad_input_by_name(kwargs: dict, match: str) -> None:
    args = {"values": [1.0, 1.2], "null": 1.0, "above": "faster", "below": "slower", **kwargs}
    with pytest.raises(ValueError, match=match):
        paired_verdict(**args)
