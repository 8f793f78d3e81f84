"""Parametrized families a whole-suite run takes in part: the first cases every time, the rest
as `sampled` cases (tests/conftest.py: 1 in 5, chosen by the commit, so successive commits
cover them all; naming the file runs every case)."""

from __future__ import annotations

import pytest


def first_then_sampled(cases, keep: int = 1) -> list:
    """`cases` (the values of a `pytest.mark.parametrize`: tuples when it names several
    arguments) with every case after the first `keep` marked `sampled`."""
    cases = list(cases)

    def sampled(case):
        values = case if isinstance(case, tuple) else (case,)
        return pytest.param(*values, marks=pytest.mark.sampled)

    return cases[:keep] + [sampled(c) for c in cases[keep:]]
