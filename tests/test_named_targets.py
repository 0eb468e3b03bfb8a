"""The run driver builds a target given by name once per process, and anew when it has changed."""

import numpy as np

from sgsim import driver, targets


def test_a_named_target_is_built_once():
    driver._NAMED_TARGETS.clear()
    first = driver._resolve_target("standard_gaussian")
    assert driver._resolve_target("standard_gaussian") is first
    assert first.fingerprint() == targets.get("standard_gaussian").fingerprint()


def test_a_changed_or_reregistered_target_is_built_anew(monkeypatch):
    driver._NAMED_TARGETS.clear()
    first = driver._resolve_target("mixture_25")
    fresh = targets.get("mixture_25").fingerprint()
    # arrays changed in place: the fingerprint sees it, and the next run gets the target as built
    means = first.params[0]
    saved = means.copy()
    means[0, 0] += 1.0
    try:
        again = driver._resolve_target("mixture_25")
    finally:
        means[...] = saved
    assert again is not first
    assert again.fingerprint() == fresh
    np.testing.assert_array_equal(again.params[0], saved)
    # a name registered to another constructor builds that one
    monkeypatch.setitem(targets.TARGETS, "mixture_25", targets.TARGETS["mixture_3x3"])
    other = driver._resolve_target("mixture_25")
    assert other.name == "mixture_3x3"
    # control: an unchanged target under an unchanged name is the cached object
    assert driver._resolve_target("mixture_25") is other
