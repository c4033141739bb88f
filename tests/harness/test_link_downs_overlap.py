"""Two ``link_down`` faults that overlap on a node's link hold it down until the later one
ends (the earlier one's heal brought the link up under the other, as two overlapping pauses
resumed a node at both ends: issue 30's neighbour)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.proxy.api import ToxiproxyServer
from harness.proxy.client import ToxiproxyClient
from harness.world.proxied.links import Downs, ProxyLinks, make_links


@pytest.fixture
def client() -> Iterator[ToxiproxyClient]:
    with ToxiproxyServer() as server:
        yield ToxiproxyClient(server.host, server.port)


def _enabled(client: ToxiproxyClient, name: str) -> bool:
    return bool(client.proxies()[name].enabled)


def test_overlapping_link_downs_keep_the_link_down_until_the_later_one_heals(
    client: ToxiproxyClient,
) -> None:
    names, _ = make_links(client, "overlap", "127.0.0.1:0", {1: "127.0.0.1:9", 2: "127.0.0.1:9"})
    links = ProxyLinks(client, names, "no log")
    short = links.link_down([1])
    long = links.link_down([1, 2])
    assert not _enabled(client, names[1]) and not _enabled(client, names[2])

    short.up()  # node 1's link is still held down by the longer fault
    assert not _enabled(client, names[1])
    short.up()  # a heal acts once
    assert not _enabled(client, names[1])

    long.up()
    assert _enabled(client, names[1]) and _enabled(client, names[2])


def test_a_down_of_a_link_already_down_disabled_nothing_and_counts_no_cut_of_its_own() -> None:
    downs = Downs()
    assert downs.take([1]) == {1: 0}  # node 1's first disabling
    assert downs.take([1, 2]) == {2: 0}  # node 1 was already down: this one cut nothing there
    assert downs.release([1]) == []
    assert downs.release([1, 2]) == [1, 2]
    assert downs.take([1]) == {1: 1}  # the link's second disabling
