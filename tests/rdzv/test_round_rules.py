"""The round's decisions (rdzv.rendezvous._round_rules), one test per rule, named by the
invariant of rdzv.rendezvous._join it keeps."""

from __future__ import annotations

from rdzv.rendezvous import _round_rules as rules


def test_invariant_1_a_world_size_other_than_the_first_nodes_aborts_the_round() -> None:
    assert rules.world_sizes_agree(4, 4)
    assert not rules.world_sizes_agree(4, 3)


def test_invariant_1_and_3_only_a_complete_verdict_is_success_whatever_the_clock() -> None:
    assert rules.is_success({"status": "complete"})
    assert not rules.is_success({"status": "aborted", "reason": "timeout"})
    assert not rules.is_success({"status": "closed"})


def test_invariant_2_complete_only_when_every_rank_confirmed() -> None:
    assert rules.completes(every_rank_confirmed=False, arbiter=False) is None
    assert rules.completes(every_rank_confirmed=True, arbiter=False) is True


def test_invariant_2_only_the_member_whose_add_filled_count_completes() -> None:
    assert rules.after_joining(3, 3, hosts=False) == "complete_when_confirmed"
    assert rules.after_joining(4, 3, hosts=False) == "complete_when_confirmed"  # a takeover
    assert rules.after_joining(2, 3, hosts=False) == "await_verdict"


def test_invariant_5_a_non_member_of_a_completed_round_is_told_stale_or_closed() -> None:
    assert rules.refusal("complete", closed=False) == "stale"
    assert rules.refusal("complete", closed=True) == "closed"
    assert rules.refusal("aborted", closed=True) == "verdict"


def test_invariant_6_takeover_only_of_a_dead_claimant_of_this_machine() -> None:
    assert rules.may_take_over(same_machine=True, holder_alive=False)
    assert not rules.may_take_over(same_machine=True, holder_alive=True)
    assert not rules.may_take_over(same_machine=False, holder_alive=False)


def test_invariant_8_member_lost_only_without_verdict_and_without_takeover() -> None:
    assert rules.member_lost(False, b"old", b"old")
    assert not rules.member_lost(True, None, b"old")
    assert not rules.member_lost(False, b"new", b"old")


def test_invariant_10_a_hosting_node_decides_and_the_filler_defers_to_it() -> None:
    assert rules.after_joining(1, 3, hosts=True) == "decide"
    assert rules.after_joining(3, 3, hosts=True) == "decide"
    assert rules.completes(every_rank_confirmed=True, arbiter=True) is False


def test_invariant_10_the_host_never_completes_with_a_pending_closed_claim() -> None:
    args = {"has_verdict": False, "closed": False, "world_size": 3, "member_due_left": None}
    assert rules.host_decision(**args, confirmed={0, 1, 2}, pending={}, deadline_left=1) == (
        "complete"
    )
    assert rules.host_decision(**args, confirmed={0, 1, 2}, pending={2}, deadline_left=1) is None
    assert rules.host_decision(**args, confirmed={0, 1}, pending={}, deadline_left=1) is None
    assert rules.host_decision(**args, confirmed={0, 1}, pending={}, deadline_left=0) == (
        "deadline"
    )


def test_invariant_10_a_verdict_or_a_closed_watch_comes_before_completion() -> None:
    common = {"confirmed": {0, 1}, "world_size": 2, "pending": {}, "deadline_left": 1.0}
    assert rules.host_decision(True, True, member_due_left=None, **common) == "verdict"
    assert rules.host_decision(False, True, member_due_left=None, **common) == "closed"


def test_invariant_11_the_host_names_the_ranks_at_the_first_member_deadline() -> None:
    common = {"has_verdict": False, "closed": False, "world_size": 3, "pending": {}}
    assert rules.host_decision(**common, confirmed={0, 1}, deadline_left=5, member_due_left=0) == (
        "member_deadline"
    )
    assert rules.host_decision(**common, confirmed={0, 1}, deadline_left=5, member_due_left=1) is (
        None
    )


def test_invariant_11_only_the_first_members_watch_and_only_they_look_for_an_arbiter() -> None:
    assert rules.watches(rules.WATCHMEN) and not rules.watches(rules.WATCHMEN + 1)
    assert rules.watches(2, watchmen=2) and not rules.watches(3, watchmen=2)
    assert rules.asks_for_arbiter(True, hosts=False, joined=1, world_size=3)
    assert not rules.asks_for_arbiter(True, hosts=True, joined=1, world_size=3)
    assert not rules.asks_for_arbiter(True, hosts=False, joined=3, world_size=3)
    assert not rules.asks_for_arbiter(False, hosts=False, joined=1, world_size=3)


def test_invariant_11_a_counted_member_watches_unless_the_host_arbitrates() -> None:
    last = rules.WATCHMEN + 5
    assert rules.watches_once_counted(1, last, hosts=False, arbitrated=None) is None  # ask
    assert rules.watches_once_counted(1, last, hosts=False, arbitrated=True) is False
    assert rules.watches_once_counted(1, last, hosts=False, arbitrated=False) is True
    assert rules.watches_once_counted(1, last, hosts=True, arbitrated=None) is True
    assert rules.watches_once_counted(last, last, hosts=False, arbitrated=None) is False
    assert rules.watches_once_counted(2, 2, hosts=False, arbitrated=None) is True  # filled


def test_invariant_11_only_the_first_add_on_diagnosing_is_elected() -> None:
    assert rules.elected(1)
    assert not rules.elected(2)


def test_invariant_11_a_timeout_verdict_names_exactly_the_ranks_not_in_joined() -> None:
    joined = rules.ranks_in(b"3,0,junk,9,0,", world_size=5)
    assert joined == {0, 3}
    assert rules.missing_ranks(joined, 5) == [1, 2, 4]
    assert rules.ranks_to_ask(list(range(100))) == list(range(rules.CLAIMS_ASKED))


def test_invariant_8_the_host_watches_a_closed_claim_only_of_an_undecided_round() -> None:
    assert rules.loss_watched(own=False, settled=False, ended=False)
    assert not rules.loss_watched(own=True, settled=False, ended=False)
    assert not rules.loss_watched(own=False, settled=True, ended=False)
    assert not rules.loss_watched(own=False, settled=False, ended=True)


def test_invariant_11_past_the_deadline_the_elected_names_and_the_others_wait_or_read() -> None:
    assert rules.after_deadline(elected=True, watchman=False) == "diagnose"
    assert rules.after_deadline(elected=False, watchman=True) == "await_diagnoser"
    assert rules.after_deadline(elected=False, watchman=False) == "read_late"
    assert rules.after_deadline(elected=None, watchman=True) == "read_late"


def test_invariant_7_a_broken_connection_is_published_only_mid_join_before_the_deadline() -> None:
    assert rules.publishes_loss(joining=True, deadline_left=0.5)
    assert not rules.publishes_loss(joining=True, deadline_left=0.0)
    assert not rules.publishes_loss(joining=False, deadline_left=0.5)
