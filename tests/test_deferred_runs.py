"""K runs of a deferred L0C sum (exec/deferred.py `_runs`): the terms (A view, B view, their
address tags) whose A slices follow each other along K in one GM buffer, as their B slices do,
become one pair of views over the whole run; anything else starts a new run."""

from __future__ import annotations

import numpy as np

from ascendir.interpreter.exec.deferred import _joined, _runs

M, K, N = 16, 96, 24
A_ROOT, B_ROOT = "a", "b"  # (address tag roots: any hashable)


def _bufs():
    rng = np.random.default_rng(0)
    return rng.standard_normal((M, K)).astype(np.float16), rng.standard_normal((K, N)).astype(np.float16)


def _term(a, b, k0, ka, kb=None, m=M, n=N, a_root=A_ROOT, b_root=B_ROOT, a_off=0, b_off=0):
    """The term of A[:m, k0:k0+ka] and B[k0:k0+kb, :n] with their tags (the A tag moved on by
    `a_off` elements, the B tag by `b_off`: a slice that does not continue the run)."""
    kb = ka if kb is None else kb
    return (a[:m, k0: k0 + ka], b[k0: k0 + kb, :n], (a_root, k0 + a_off, (K, 1)), (b_root, k0 * N + b_off, (N, 1)))


def _ks(pairs):
    return [(ga.shape, gb.shape) for ga, gb, *_ in pairs]


def _same(pairs, a, b, spans):
    """pairs are views of a and b over the K ranges `spans` ([k0, k1) each, full rows / columns)."""
    assert len(pairs) == len(spans)
    for (ga, gb, *_), (k0, k1) in zip(pairs, spans):
        assert ga.base is a and gb.base is b
        assert np.shares_memory(ga, a[:, k0:k1]) and ga.shape == (M, k1 - k0)
        assert np.array_equal(ga, a[:, k0:k1]) and np.array_equal(gb, b[k0:k1, :])
        assert ga.__array_interface__["data"][0] == a[:, k0:].__array_interface__["data"][0]
        assert gb.__array_interface__["data"][0] == b[k0:].__array_interface__["data"][0]


def test_continuing_slices_are_one_run():
    a, b = _bufs()
    terms = [_term(a, b, k0, 32) for k0 in (0, 32, 64)]
    _same(_runs(terms), a, b, [(0, 96)])
    # (with the tags of its first slices: a run's views start there, data_loop_memo.py moves them by these)
    assert [r[2:] for r in _runs(terms)] == [terms[0][2:]]


def test_a_gap_along_k_starts_a_run():
    a, b = _bufs()
    terms = [_term(a, b, 0, 16), _term(a, b, 16, 16), _term(a, b, 48, 16), _term(a, b, 64, 32)]
    _same(_runs(terms), a, b, [(0, 32), (48, 96)])


def test_tags_that_do_not_continue_start_a_run():
    a, b = _bufs()
    # the views continue but the A tag says otherwise (another buffer's offsets), the root differs,
    # no tag: the run stops before it (the tags, not the views, prove the slices' places), and the
    # slice after it does not continue it either
    for bad in (_term(a, b, 32, 32, a_off=1), _term(a, b, 32, 32, b_off=N), _term(a, b, 32, 32, a_root="other"),
                _term(a, b, 32, 32, b_root="other")):
        _same(_runs([_term(a, b, 0, 32), bad, _term(a, b, 64, 32)]), a, b, [(0, 32), (32, 64), (64, 96)])
    _same(_runs([_term(a, b, 0, 32), _term(a, b, 32, 32), _term(a, b, 64, 32, a_off=-1)]), a, b, [(0, 64), (64, 96)])
    t = _term(a, b, 32, 32)
    none = (t[0], t[1], None, t[3])
    pairs = _runs([_term(a, b, 0, 32), none, _term(a, b, 64, 32)])
    assert _ks(pairs) == [((M, 32), (32, N))] * 3


def test_other_rows_or_columns_or_buffers_start_a_run():
    a, b = _bufs()
    assert len(_runs([_term(a, b, 0, 32), _term(a, b, 32, 32, m=8)])) == 2
    assert len(_runs([_term(a, b, 0, 32), _term(a, b, 32, 32, n=8)])) == 2
    a2, b2 = a.copy(), b.copy()
    t = _term(a2, b2, 32, 32)
    pairs = _runs([_term(a, b, 0, 32), t])
    assert len(pairs) == 2 and pairs[1][0].base is a2


def test_a_slice_padded_along_k_ends_its_run():
    # the L0B tile of the last K step holds fewer rows than the L0A tile's columns (zeros beyond):
    # its product is over the rows B has; the run ends there, the next term starts another
    a, b = _bufs()
    terms = [_term(a, b, 0, 32), _term(a, b, 32, 32, kb=16), _term(a, b, 48, 16)]
    pairs = _runs(terms)
    _same(pairs[:1], a, b, [(0, 48)])
    assert _ks(pairs) == [((M, 48), (48, N)), ((M, 16), (16, N))]
    assert np.array_equal(pairs[1][0], a[:, 48:64]) and np.array_equal(pairs[1][1], b[48:64])
    # a padded first term is a run of its own, cut to B's rows
    pairs = _runs([_term(a, b, 0, 32, kb=16), _term(a, b, 32, 32)])
    assert _ks(pairs) == [((M, 16), (16, N)), ((M, 32), (32, N))]


def _fold(terms):
    """terms with each one `_joined` onto the one before it where it may (data_loop_memo.py's
    stored adds)."""
    out = [terms[0]]
    for t in terms[1:]:
        j = _joined(out[-1], t)
        if j is None:
            out.append(t)
        else:
            out[-1] = j
    return out


def _views(pairs):
    return [tuple((v.shape, v.strides, v.base is not None and id(v.base), v.__array_interface__["data"][0]) for v in p[:2])
            for p in pairs]


def _cases():
    """Sums' terms (A, B and their K slices' sequences) that join and that do not."""
    a, b = _bufs()
    t = _term(a, b, 32, 32)
    return a, b, [
        [_term(a, b, k0, 16) for k0 in range(0, 96, 16)],
        [_term(a, b, 0, 16), _term(a, b, 16, 16), _term(a, b, 48, 16), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a, b, 32, 32, a_off=1), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a, b, 32, 32, b_off=N), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a, b, 32, 32, a_root="other"), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), (t[0], t[1], None, t[3]), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a, b, 32, 32, m=8), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a, b, 32, 32, n=8), _term(a, b, 64, 32)],
        [_term(a, b, 0, 16), _term(a, b, 16, 16), _term(a, b, 32, 32, kb=16), _term(a, b, 48, 16)],
        [_term(a, b, 0, 32, kb=16), _term(a, b, 32, 32), _term(a, b, 64, 32)],
        [_term(a, b, 0, 32), _term(a.copy(), b.copy(), 32, 32), _term(a, b, 64, 32)],
    ]


def test_joined_terms_give_the_runs_of_their_slices():
    # whatever the slices, a sum of joined terms has the runs (hence the products) of the sum of
    # the slices; joining happens only where a run goes on
    a, b, cases = _cases()
    joins = 0
    for terms in cases:
        folded = _fold(terms)
        joins += len(terms) - len(folded)
        assert _views(_runs(folded)) == _views(_runs(terms))
    assert joins >= 6
    assert len(_fold(cases[0])) == 1 and len(_fold(cases[2])) == 3


def test_appends_join_like_joined_one_by_one():
    # data_loop_memo._appends checks a chain of appends along K (`_run_k`) and builds each
    # joined term once (`_run_term`): the views `_joined` builds one append at a time, the
    # appends after the add that started the region one stretch
    from ascendir.interpreter.exec.data_loop_memo import _appends

    for terms in _cases()[2]:
        adds = [("c", (0, (M, N), (N, 1)), None, t, False) for t in terms]
        items, stretches = _appends(adds, [0])  # (the first add starts the region: no plain append)
        joined = items[1:]
        assert items[0] is adds[0] and stretches == ((1, len(items), 1),)
        assert _views([j[3][:2] for j in joined]) == _views([t[:2] for t in _fold(terms[1:])])
        assert [j[3][2:] for j in joined] == [t[2:] for t in _fold(terms[1:])]
