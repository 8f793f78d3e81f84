"""The whole-suite sample of heavy cases (tests/conftest.py): fixed for a commit, about 1 in
SHARE of them, another share for another commit, every case taken by some commit."""

from __future__ import annotations

from conftest import SHARE, picked

IDS = [f"tests/test_x.py::test_case[{i}]" for i in range(2000)]


def test_sample_is_fixed_per_commit_and_about_one_in_share() -> None:
    a = [i for i in IDS if picked(i, "commit-a")]
    assert a == [i for i in IDS if picked(i, "commit-a")]
    assert abs(len(a) / len(IDS) - 1 / SHARE) < 0.03, len(a)
    b = {i for i in IDS if picked(i, "commit-b")}
    assert set(a) != b and len(set(a) & b) < len(a) / 2


def test_successive_commits_cover_every_case() -> None:
    seen: set[str] = set()
    for c in range(20 * SHARE):
        seen |= {i for i in IDS[:200] if picked(i, f"commit-{c}")}
    assert seen == set(IDS[:200])
