"""fetch_events and publish_events against real relays: ``snap-spark relay`` processes, an
in-process relay, a port nothing listens on, and a scripted relay that misbehaves."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from snap_spark.nostr import stored
from snap_spark.nostr.client import (
    DEFAULT_KINDS,
    EPHEMERAL_KIND,
    MESSAGE_KINDS,
    STORED_KIND,
    FetchedEvent,
    RelayFetch,
    RelayUnreachable,
    fetch_events,
    publish_events,
)
from snap_spark.nostr.relay import RelayThread
from snap_spark.protocol.nostr import check_card_event, check_event, event_id
from tests.nostr.conftest import PRIV_B, card_event, message_event
from tests.nostr.relays import RelayProcess, ScriptedRelay


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [json.dumps(e) for e in events]


def fetched_objects(fetch: RelayFetch) -> list[dict[str, Any]]:
    return [json.loads(e.event_json) for e in fetch.events]


def ids(fetch: RelayFetch) -> set[str]:
    return {json.loads(e.event_json)["id"] for e in fetch.events}


def publish_all(url: str, events: list[dict[str, Any]]) -> None:
    outcomes = publish_events(url, texts(events))
    assert [(o.event_id, o.accepted) for o in outcomes] == [(e["id"], True) for e in events], (
        outcomes)


def test_published_events_come_back_as_signed(relay: RelayProcess, now: int) -> None:
    card = card_event(created_at=now - 60)
    messages = [message_event(created_at=now - i, content=f"m{i}") for i in range(3)]
    before = time.time()
    publish_all(relay.url, [card, *messages])

    [fetch] = fetch_events([relay.url])
    after = time.time()

    assert fetch.url == relay.url and fetch.error is None
    assert sorted(fetched_objects(fetch), key=lambda e: e["id"]) == sorted(
        [card, *messages], key=lambda e: e["id"])
    assert all(check_event(e) == ("ok", "id and signature verified")
               for e in fetched_objects(fetch))
    assert check_card_event(json.loads(next(
        e.event_json for e in fetch.events if '"kind":31337' in e.event_json)))[0] == "valid"
    assert all(isinstance(e, FetchedEvent) and e.relay == relay.url
               and before <= e.received_at <= after for e in fetch.events)
    assert fetch.newest_created_at == now
    assert 0 < fetch.seconds < 10


def test_kinds_select_what_is_fetched(relay: RelayProcess, now: int) -> None:
    card = card_event(created_at=now)
    message = message_event(created_at=now)
    note = message_event(created_at=now, kind=1, content="a kind-1 note")
    publish_all(relay.url, [card, message, note])

    assert ids(fetch_events([relay.url])[0]) == {card["id"], message["id"]}
    assert ids(fetch_events([relay.url], kinds=[1])[0]) == {note["id"]}
    assert ids(fetch_events([relay.url], kinds=[])[0]) == {card["id"], message["id"], note["id"]}


def test_ephemeral_messages_are_accepted_but_never_stored(relay: RelayProcess,
                                                         now: int) -> None:
    """A relay forwards a kind-21339 message to the subscribers connected when it arrives
    and keeps none: a fetch never returns one, even one that asks for the kind. So a fetch
    asks for the stored kinds only (DEFAULT_KINDS)."""
    assert (STORED_KIND, EPHEMERAL_KIND) == MESSAGE_KINDS == stored.MESSAGE_KINDS
    assert DEFAULT_KINDS == (31337, STORED_KIND)
    kept = message_event(created_at=now, tags=[["p", "ab" * 32]])
    ephemeral = message_event(created_at=now, tags=[["p", "ab" * 32]], kind=EPHEMERAL_KIND)
    publish_all(relay.url, [kept, ephemeral])  # accepted: OK true
    assert ids(fetch_events([relay.url])[0]) == {kept["id"]}
    assert ids(fetch_events([relay.url], kinds=MESSAGE_KINDS)[0]) == {kept["id"]}
    assert ids(fetch_events([relay.url], kinds=[EPHEMERAL_KIND])[0]) == set()


def test_since_filters_per_relay_or_for_all(relay: RelayProcess, now: int) -> None:
    old, mid, new = (message_event(created_at=now - age, content=str(age))
                     for age in (300, 200, 100))
    publish_all(relay.url, [old, mid, new])
    with RelayThread() as other:
        publish_all(other, [old, mid, new])

        # since includes its own second
        assert ids(fetch_events([relay.url], since=now - 200)[0]) == {mid["id"], new["id"]}
        both = fetch_events([relay.url, other], since={relay.url: now - 100})
        assert [f.url for f in both] == [relay.url, other]
        assert ids(both[0]) == {new["id"]}
        assert ids(both[1]) == {old["id"], mid["id"], new["id"]}  # not in the mapping: all

        # resuming from newest_created_at brings only that second again
        later = message_event(created_at=now - 50, content="later")
        publish_all(other, [later])
        resumed = fetch_events([other], since={other: both[1].newest_created_at or 0})[0]
        assert ids(resumed) == {new["id"], later["id"]}
        assert resumed.newest_created_at == now - 50


def test_a_down_relay_is_an_error_entry_and_the_others_still_answer(
        relay: RelayProcess, down_relay_url: str, now: int) -> None:
    event = message_event(created_at=now)
    publish_all(relay.url, [event])

    down, good, bad = fetch_events([down_relay_url, relay.url, "http://not-a-relay"],
                                   timeout=5)

    assert (down.url, down.events, down.newest_created_at) == (down_relay_url, [], None)
    assert down.error == "cannot connect: Connection refused (os error 111)"
    assert good.error is None and ids(good) == {event["id"]}
    assert bad.error is not None and bad.error.startswith("not a relay URL")


def test_a_relay_that_stalls_times_out_with_what_it_sent(now: int) -> None:
    sent = [message_event(created_at=now - i, content=str(i)) for i in range(2)]
    with ScriptedRelay("stall", texts(sent)) as url:
        started = time.monotonic()
        [fetch] = fetch_events([url], timeout=1.5)
    assert 1.5 <= time.monotonic() - started < 5
    assert fetch.error == "timed out after 1.5s waiting for the end of stored events"
    assert fetched_objects(fetch) == sent
    assert fetch.newest_created_at == now


def test_a_relay_that_never_completes_the_handshake_times_out() -> None:
    with ScriptedRelay("no_handshake") as url:
        [fetch] = fetch_events([url], timeout=1)
    assert fetch.events == [] and fetch.error is not None
    assert fetch.error.startswith("cannot connect: no answer within "), fetch.error
    assert fetch.seconds < 4


def test_a_dropped_connection_keeps_the_events_received_before(now: int) -> None:
    sent = [message_event(created_at=now, content="before the drop")]
    with ScriptedRelay("drop", texts(sent)) as url:
        [fetch] = fetch_events([url], timeout=5)
    assert fetch.error is not None and fetch.error.startswith("connection lost"), fetch.error
    assert fetched_objects(fetch) == sent


def test_a_closed_subscription_is_an_error_with_the_relays_reason(now: int) -> None:
    with ScriptedRelay("close_subscription", closed_reason="auth-required: who are you") as url:
        [fetch] = fetch_events([url], timeout=5)
    assert fetch.error == "relay closed the subscription: auth-required: who are you"


def test_what_nostr_sdk_lets_through_from_a_relay(now: int) -> None:
    """Pinned facts of nostr-sdk 0.45.1 (the module docstring of the client states them)."""
    genuine = message_event(created_at=now, content="genuine")
    forged_new = {**message_event(created_at=now, content="forged"), "sig": "ab" * 64}
    bad_id = {**message_event(created_at=now, content="x"), "content": "tampered"}
    forged_copy = {**genuine, "sig": "cd" * 64}  # a bad copy of an id already seen
    extra = {**message_event(created_at=now, content="extra"), "note": "not NIP-01"}
    sent = [json.dumps(forged_new), json.dumps(bad_id), '{"id":"short"}', json.dumps(genuine),
            json.dumps(forged_copy), json.dumps(extra)]
    with ScriptedRelay("serve", sent) as url:
        [fetch] = fetch_events([url], timeout=5)
    assert fetch.error is None
    without_extra = {k: v for k, v in extra.items() if k != "note"}
    assert fetched_objects(fetch) == [genuine, forged_copy, without_extra]
    assert check_event(forged_copy)[0] == "bad_event_sig"
    # nostr-sdk writes NIP-01's fields in NIP-01's order
    assert list(fetched_objects(fetch)[0]) == [
        "id", "pubkey", "created_at", "kind", "tags", "content", "sig"]


def test_more_events_than_one_reply_holds_are_paged(relay: RelayProcess, now: int) -> None:
    # nostr-sdk's relay answers a REQ with at most 500 events; 3 events per second
    events = [message_event(created_at=now - i // 3, content=str(i)) for i in range(1100)]
    assert all(o.accepted for o in publish_events(relay.url, texts(events)))
    [fetch] = fetch_events([relay.url])
    assert fetch.error is None
    assert len(fetch.events) == 1100 and ids(fetch) == {e["id"] for e in events}


def test_forged_and_malformed_events_are_refused_with_the_reason(
        relay: RelayProcess, now: int) -> None:
    genuine = message_event(created_at=now, content="genuine")
    bad_sig = {**message_event(created_at=now, content="other"), "sig": "ab" * 64}
    bad_id = {**genuine, "content": "tampered"}
    later = message_event(created_at=now, content="after the refusals")
    outcomes = publish_events(relay.url, [
        json.dumps(genuine), json.dumps(bad_sig), json.dumps(bad_id), '{"kind": 1}',
        "not json", json.dumps({**genuine, "id": "zz"}), json.dumps(genuine), json.dumps(later),
    ])
    assert [(o.event_id, o.accepted, o.message) for o in outcomes] == [
        (genuine["id"], True, ""),
        (bad_sig["id"], False, "invalid: invalid event signature"),
        (genuine["id"], False, "invalid: invalid event ID"),
        (None, False, outcomes[3].message),
        (None, False, outcomes[4].message),
        (None, False, outcomes[5].message),
        (genuine["id"], True, "duplicate: already have this event"),
        (later["id"], True, ""),
    ]
    assert all(o.message.startswith("not a Nostr event: ") for o in outcomes[3:6])
    assert not any(o.connection_lost for o in outcomes)
    assert ids(fetch_events([relay.url])[0]) == {genuine["id"], later["id"]}


def test_the_relay_keeps_only_the_current_card_and_refuses_expired_events(
        relay: RelayProcess, now: int) -> None:
    """Pinned facts of nostr-sdk 0.45.1's relay (relay.py's docstring states them)."""
    first = card_event(created_at=now - 100, name="first")
    newer = card_event(created_at=now - 50, name="newer")
    older = card_event(created_at=now - 200, name="older")
    same_second = sorted([card_event(created_at=now - 10, name="x"),
                          card_event(created_at=now - 10, name="y")], key=lambda e: e["id"])
    other_agent = card_event(PRIV_B, created_at=now - 300)
    expired = message_event(created_at=now - 100, tags=[["expiration", str(now - 1)]])
    expiring = message_event(created_at=now, tags=[["expiration", str(now + 3600)]])
    outcomes = publish_events(relay.url, texts([first, newer, older, same_second[0],
                                                same_second[1], other_agent, expired,
                                                expiring]))
    assert [(o.accepted, o.message) for o in outcomes] == [
        (True, ""), (True, ""), (False, "error: unknown"), (True, ""),
        (False, "error: unknown"),  # same second, higher id: the lower id stays
        (True, ""), (False, "blocked: event is expired"), (True, ""),
    ]
    assert ids(fetch_events([relay.url])[0]) == {
        same_second[0]["id"], other_agent["id"], expiring["id"]}


def test_publishing_to_a_down_relay_raises_relay_unreachable(down_relay_url: str) -> None:
    consumed: list[str] = []

    def events() -> Any:
        consumed.append("read")
        yield "{}"

    with pytest.raises(RelayUnreachable) as caught:
        publish_events(down_relay_url, events(), timeout=5)
    assert caught.value.url == down_relay_url
    assert caught.value.reason == "cannot connect: Connection refused (os error 111)"
    assert consumed == []


def test_a_connection_lost_while_publishing_is_reported_per_event(now: int) -> None:
    events = [message_event(created_at=now, content=str(i)) for i in range(3)]
    with ScriptedRelay("drop_on_publish") as url:
        outcomes = publish_events(url, texts(events), timeout=5)
    assert [o.event_id for o in outcomes] == [e["id"] for e in events]
    assert [o.accepted for o in outcomes] == [False, False, False]
    assert all(o.connection_lost for o in outcomes)
    assert outcomes[0].message.startswith("not confirmed: connection lost")
    assert outcomes[1].message.startswith("not sent: connection lost")


def test_the_functions_work_inside_a_running_event_loop(relay: RelayProcess, now: int) -> None:
    event = message_event(created_at=now)

    async def notebook_cell() -> RelayFetch:
        assert publish_events(relay.url, [json.dumps(event)])[0].accepted
        return fetch_events([relay.url])[0]

    assert ids(asyncio.run(notebook_cell())) == {event["id"]}


@pytest.mark.parametrize(("kwargs", "error"), [
    ({"timeout": 0}, ValueError), ({"timeout": float("nan")}, ValueError),
    ({"since": -1}, ValueError), ({"since": True}, ValueError),
    ({"since": {"ws://x": 1.5}}, ValueError), ({"kinds": [70000]}, ValueError),
    ({"kinds": ["1"]}, ValueError),
])
def test_bad_arguments_are_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        fetch_events(["ws://x"], **kwargs)


def test_one_url_string_is_not_a_list_of_relays() -> None:
    with pytest.raises(TypeError):
        fetch_events("ws://127.0.0.1:9")


def test_event_ids_reported_are_nip01_ids(relay: RelayProcess, now: int) -> None:
    event = message_event(created_at=now, content="é\u2028\x01")
    [outcome] = publish_events(relay.url, [json.dumps(event, ensure_ascii=False)])
    assert outcome.accepted and outcome.event_id == event_id(event) == event["id"]
    [fetch] = fetch_events([relay.url])
    assert fetched_objects(fetch) == [event]
