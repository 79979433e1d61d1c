"""The order of a round's calls (interleave.call_order): every side and the empty calls once per
repetition, no side always first, and in the back-to-back order each side's repetitions in a row."""

from __future__ import annotations

from collections import Counter
from itertools import groupby

import pytest

from evoteam.servers.bench.measurement.interleave import call_order

SLOTS = ["baseline", "candidate", None]


@pytest.mark.parametrize("blocks", [True, False])
def test_every_slot_is_called_once_per_repetition_every_round(blocks):
    for r in range(12):
        calls = [(s, j) for s, j, _ in call_order(SLOTS, r, 3, blocks)]
        assert sorted(calls, key=repr) == sorted([(s, j) for s in SLOTS for j in range(3)], key=repr)


@pytest.mark.parametrize("blocks", [True, False])
def test_no_slot_is_always_first_or_always_after_the_same_one(blocks):
    firsts, followers = set(), {}
    for r in range(2 * len(SLOTS)):
        calls = list(call_order(SLOTS, r, 2, blocks))
        seq = [s for s, _, _ in calls]
        # Who opens a round (back to back) or a repetition (one call per side each).
        firsts.update([seq[0]] if blocks else [s for i, (s, j, _) in enumerate(calls) if i == 0 or calls[i - 1][1] != j])
        for a, b in zip(seq, seq[1:]):
            if a != b:
                followers.setdefault(b, set()).add(a)
    assert firsts == set(SLOTS)
    assert all(len(before) > 1 for before in followers.values()), followers


def test_back_to_back_order_calls_each_side_s_repetitions_in_a_row():
    for r in range(6):
        calls = list(call_order(SLOTS, r, 2, True))
        runs = [(s, [j for _, j, _ in group]) for s, group in groupby(calls, key=lambda c: c[0])]
        assert [s for s, _ in runs] == list(dict.fromkeys(s for s, _, _ in calls))  # one run per slot
        assert all(js == [0, 1] for _, js in runs)
        assert [last for _, _, last in calls] == [False, True] * len(SLOTS)  # a group ends with each run


def test_one_call_per_side_order_calls_every_side_in_each_repetition_before_the_next():
    for r in range(6):
        calls = list(call_order(SLOTS, r, 2, False))
        assert [j for _, j, _ in calls] == [0, 0, 0, 1, 1, 1]
        assert {s for s, j, _ in calls if j == 0} == {s for s, j, _ in calls if j == 1} == set(SLOTS)
        assert [last for _, _, last in calls] == [False, False, True] * 2  # a group ends with each repetition


def _rounds(slots, reps, rounds=None):
    """Every round's calls, by default over a whole cycle of the order (2n(n-1) rounds)."""
    n = len(slots)
    return [[s for s, _, _ in call_order(slots, r, reps, False)] for r in range(rounds or 2 * n * (n - 1))]


@pytest.mark.parametrize("n", [3, 4, 5, 6])
@pytest.mark.parametrize("reps", [1, 2, 3])
def test_every_slot_opens_a_round_equally_often_and_none_follows_itself(n, reps):
    """A call's time depends on what ran just before it: the first call after fresh inputs were
    made, and a side called right after itself (its caches warm), are not like the others. Over
    a cycle every slot opens as many rounds, and no slot is ever called twice in a row within a
    round (the order of 2026-12-02 opened 4 of 6 rounds with the baseline and none with the
    candidate, and called the candidate twice in a row, the baseline never)."""
    slots = [f"s{i}" for i in range(n - 1)] + [None]
    rounds = _rounds(slots, reps)
    openers = Counter(seq[0] for seq in rounds)
    assert set(openers) == set(slots) and len(set(openers.values())) == 1, openers
    for seq in rounds:
        assert all(a != b for a, b in zip(seq, seq[1:])), seq
    follows = Counter(pair for seq in rounds for pair in zip(seq, seq[1:]))
    assert all(follows[(a, b)] > 0 for a in slots for b in slots if a != b), follows


@pytest.mark.parametrize("reps", [1, 2, 3])
def test_with_one_candidate_each_side_follows_each_other_slot_equally_often(reps):
    """An evaluation (baseline, candidate, empty calls): the baseline and the candidate see the
    same company, so a copy of the baseline has nothing in the order that favours it."""
    follows = Counter(pair for seq in _rounds(SLOTS, reps) for pair in zip(seq, seq[1:]))
    assert len(set(follows.values())) == 1 and len(follows) == 6, follows


@pytest.mark.parametrize("reps", [1, 2, 3])
@pytest.mark.parametrize("rounds", [2, 4, 6, 10, 20])
def test_any_even_number_of_rounds_treats_the_baseline_and_one_candidate_alike(reps, rounds):
    """The shipped kits time 10 rounds (not a whole cycle of the design) and small test kits 2:
    still, per workload, the baseline and the candidate open as many rounds and are called as
    often right after the empty calls and right after each other."""
    seqs = _rounds(SLOTS, reps, rounds)
    openers = Counter(seq[0] for seq in seqs)
    follows = Counter(pair for seq in seqs for pair in zip(seq, seq[1:]))
    assert openers["baseline"] == openers["candidate"], openers
    assert follows[(None, "baseline")] == follows[(None, "candidate")], follows
    assert follows[("candidate", "baseline")] == follows[("baseline", "candidate")], follows
    assert follows[("baseline", None)] == follows[("candidate", None)], follows
    assert all(a != b for seq in seqs for a, b in zip(seq, seq[1:]))


@pytest.mark.parametrize("n", [4, 5, 7])
def test_with_more_sides_every_n_minus_one_rounds_each_opens_as_many(n):
    """compare (baseline, A, B) and remeasure (several finalists): over each block of n-1 rounds
    every timed side opens a round equally often."""
    slots = [f"s{i}" for i in range(n - 1)] + [None]
    for start in range(0, 4 * (n - 1), n - 1):
        seqs = [[s for s, _, _ in call_order(slots, r, 2, False)] for r in range(start, start + n - 1)]
        openers = [seq[0] for seq in seqs]
        # A block opens every round with the empty calls, or each timed side opens one round.
        assert openers == [None] * (n - 1) or sorted(openers) == slots[:-1], openers
