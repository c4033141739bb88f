"""Tests for rdzv.endpoint: torch's behaviour tables, torch's own tests, properties, and a
differential test against torch's parser that allows exactly the documented deviations."""

from __future__ import annotations

import ast
import ipaddress
import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rdzv.endpoint
from rdzv.endpoint import parse_rendezvous_config, parse_rendezvous_endpoint, try_parse_port

DEFAULT = 29400


def port_prefix(endpoint: str) -> str:
    """torch's port message for ``endpoint``, verbatim."""
    return " ".join(
        (
            f"The port number of the rendezvous endpoint '{endpoint}' must be an integer",
            "between 0 and 65536.",
        )
    )


def hostname_prefix(endpoint: str) -> str:
    """torch's hostname message for ``endpoint``, verbatim."""
    return " ".join(
        (
            f"The hostname of the rendezvous endpoint '{endpoint}' must be a dot-separated list",
            "of labels, an IPv4 address, or an IPv6 address.",
        )
    )


CONFIG_FORMAT = " ".join(
    (
        "The rendezvous configuration string must be in format",
        "<key1>=<value1>,...,<keyN>=<valueN>.",
    )
)


def config_value_prefix(key: str) -> str:
    return f"The rendezvous configuration option '{key}' must have a value specified."


def starts_with(prefix: str, reason: str) -> str:
    """A ``match=`` pattern: torch's sentence first, then our reason somewhere after it."""
    return f"(?s)^{re.escape(prefix)} .*{re.escape(reason)}"


# --- torch's behaviour table (reference/torch-rendezvous.md §1.8), rows torch accepts -------

ACCEPTED_LIKE_TORCH = [
    (None, ("localhost", DEFAULT)),
    ("", ("localhost", DEFAULT)),
    ("   ", ("localhost", DEFAULT)),
    ("localhost", ("localhost", DEFAULT)),
    ("localhost:0", ("localhost", 0)),
    (" localhost:80 ", ("localhost", 80)),
    ("localhost:00080", ("localhost", 80)),
    ("h:65535", ("h", 65535)),
    ("[::1]", ("::1", DEFAULT)),
    ("[::1]:80", ("::1", 80)),
    ("[2001:db8::1]:0", ("2001:db8::1", 0)),
    ("[h]:1", ("h", 1)),
    ("[a.b]", ("a.b", DEFAULT)),
    ("host_name:1", ("host_name", 1)),
    ("höst:1", ("höst", 1)),
    ("-h-:1", ("-h-", 1)),
    ("localhost.:5", ("localhost.", 5)),
    ("\t10.0.0.1:29500\n", ("10.0.0.1", 29500)),
]


@pytest.mark.parametrize(("endpoint", "expected"), ACCEPTED_LIKE_TORCH)
def test_endpoint_parses_to_the_same_host_and_port_as_torch(
    endpoint: str | None, expected: tuple[str, int]
) -> None:
    assert parse_rendezvous_endpoint(endpoint, DEFAULT) == expected


PORT_ERRORS = [
    ("h:65536", "65536 is larger than 65535"),
    ("h:99999", "99999 is larger than 65535"),
    ("localhost:123456", "'123456' has 6 digits; a port has at most 5"),
    ("host:", "Nothing follows the last ':'"),
    ("h:+1", "'+1' (after the last ':') is not a number of ASCII digits"),
    ("h:-1", "'-1' (after the last ':') is not a number of ASCII digits"),
    ("h: 1", "' 1' (after the last ':') is not a number of ASCII digits"),
    ("h:abc", "'abc' (after the last ':') is not a number of ASCII digits"),
    ("h:\u0663", "'\u0663' (after the last ':') is not a number of ASCII digits"),
    ("[::1]:", "Nothing follows the last ':'"),
    ("~:abc", "'abc'"),  # port is checked before host, as in torch
    ("fe80::1%eth0", "enclose it in brackets: '[fe80::1%eth0]'"),
]


@pytest.mark.parametrize(("endpoint", "reason"), PORT_ERRORS)
def test_bad_port_raises_torchs_port_message_followed_by_the_reason(
    endpoint: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=starts_with(port_prefix(endpoint), reason)):
        parse_rendezvous_endpoint(endpoint, DEFAULT)


HOSTNAME_ERRORS = [
    (":123", "The host (before ':') is empty"),
    ("~", "The host '~' contains '~' (U+007E)"),
    ("a b:1", "The host 'a b' contains ' ' (U+0020)"),
    ("h/x:1", "contains '/'"),
    ("h@x:1", "contains '@'"),
    ("*:1", "contains '*'"),
    ("[]", "The brackets are empty"),
    ("[]:80", "The brackets are empty"),
    ("[::1", "The '[' that opens the host has no closing ']'"),
    ("[a]b:1", "stray bracket"),
    ("[[::1]]", "stray bracket"),
    ("[fe80::1%eth 0]:1", "The zone id 'eth 0' of 'fe80::1%eth 0' must be an interface name"),
    ("[fe80::1%]", "The zone id '' of 'fe80::1%' must be"),
]


@pytest.mark.parametrize(("endpoint", "reason"), HOSTNAME_ERRORS)
def test_bad_host_raises_torchs_hostname_message_followed_by_the_reason(
    endpoint: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=starts_with(hostname_prefix(endpoint), reason)):
        parse_rendezvous_endpoint(endpoint, DEFAULT)


def test_message_quotes_the_stripped_endpoint_like_torch() -> None:
    with pytest.raises(ValueError, match=starts_with(port_prefix("h:x"), "'x'")):
        parse_rendezvous_endpoint("  h:x \n", DEFAULT)


# --- documented deviations (module docstring, items 1-4) -------------------------------------

# (input, what torch 2.13 returns, reason rdzv gives)
REJECTED_UNLIKE_TORCH = [
    ("::1", (":", 1), "'::1' looks like an IPv6 address without brackets. Write '[::1]'"),
    ("fe80::1", ("fe80:", 1), "Write '[fe80::1]', or '[fe80::1]:PORT'"),
    ("2001:db8::1", ("2001:db8:", 1), "Write '[2001:db8::1]'"),
    ("::1:80", ("::1", 80), "Write '[::1]:80' for ::1 port 80, or '[::1:80]'"),
    ("h:1:2", ("h:1", 2), "The host 'h:1' contains ':'; only an IPv6 address in brackets"),
    ("[h:1]", ("h:1", DEFAULT), "'h:1' is in brackets but is not a valid IPv6 address"),
    ("[:::]:7", (":::", 7), "':::' is in brackets but is not a valid IPv6 address"),
    ("a..b", ("a..b", DEFAULT), "The host 'a..b' has an empty label"),
    (".", (".", DEFAULT), "The host '.' has an empty label"),
    (".a:1", (".a", 1), "has an empty label"),
    ("a" * 64 + ":1", ("a" * 64, 1), "is 64 characters long; a DNS label has at most 63"),
    (
        ".".join(["a" * 63] * 4),
        (".".join(["a" * 63] * 4), DEFAULT),
        "The host is 255 characters long; a DNS name has at most 253",
    ),
    ("h\n:1", ("h\n", 1), "The host 'h\\n' contains '\\n' (U+000A)"),
    ("[h\n]", ("h\n", DEFAULT), "contains '\\n'"),
]


@pytest.mark.parametrize(("endpoint", "torch_result", "reason"), REJECTED_UNLIKE_TORCH)
def test_endpoint_torch_silently_misreads_is_rejected_with_the_fix_named(
    endpoint: str, torch_result: tuple[str, int], reason: str
) -> None:
    del torch_result  # documents the deviation; checked against torch in the differential test
    with pytest.raises(ValueError, match=starts_with(hostname_prefix(endpoint), reason)):
        parse_rendezvous_endpoint(endpoint, DEFAULT)


@pytest.mark.parametrize(
    ("endpoint", "expected"),
    [
        ("[fe80::1%eth0]:1", ("fe80::1%eth0", 1)),
        ("[fe80::1%eth0]", ("fe80::1%eth0", DEFAULT)),
        ("[fe80::1%3]:29500", ("fe80::1%3", 29500)),
        ("[fe80::a:b%br-lan.10]:0", ("fe80::a:b%br-lan.10", 0)),
    ],
)
def test_bracketed_ipv6_with_a_zone_id_is_accepted_unlike_torch(
    endpoint: str, expected: tuple[str, int]
) -> None:
    assert parse_rendezvous_endpoint(endpoint, DEFAULT) == expected


@pytest.mark.parametrize(
    "host", ["a" * 63, ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61]), "x." * 126 + "y"]
)
def test_host_at_the_dns_length_limits_is_accepted(host: str) -> None:
    assert len(host.removesuffix(".")) <= 253
    assert parse_rendezvous_endpoint(f"{host}:1", DEFAULT) == (host, 1)


@pytest.mark.parametrize("endpoint", [123, b"localhost:1", ["h"]])
def test_endpoint_of_the_wrong_type_raises_type_error_naming_it(endpoint: Any) -> None:
    with pytest.raises(TypeError, match="must be a str or None, got"):
        parse_rendezvous_endpoint(endpoint, DEFAULT)


@pytest.mark.parametrize("default_port", [-1, 0, 65535])
def test_default_port_is_returned_unchecked_like_torch(default_port: int) -> None:
    assert parse_rendezvous_endpoint("h", default_port) == ("h", default_port)
    assert parse_rendezvous_endpoint(None, default_port) == ("localhost", default_port)


# --- torch's own tests (utils_test.py, reference §4.2), minus the trailing `$` ---------------

TORCH_TEST_HOSTS = [
    ("dummy.com", "dummy.com"),
    ("dummy-1.com", "dummy-1.com"),
    ("123.123.123.123", "123.123.123.123"),
    ("[2001:db8::1]", "2001:db8::1"),
]


@pytest.mark.parametrize(("written", "host"), TORCH_TEST_HOSTS)
@pytest.mark.parametrize("port", [0, 123, 65535])
def test_torch_endpoint_with_port_returns_host_without_brackets_and_int_port(
    written: str, host: str, port: int
) -> None:
    assert parse_rendezvous_endpoint(f"{written}:{port}", default_port=123) == (host, port)


@pytest.mark.parametrize(("written", "host"), TORCH_TEST_HOSTS)
def test_torch_endpoint_without_port_returns_the_default_port(written: str, host: str) -> None:
    assert parse_rendezvous_endpoint(written, default_port=123) == (host, 123)


def test_torch_empty_endpoint_returns_localhost() -> None:
    assert parse_rendezvous_endpoint("", default_port=123) == ("localhost", 123)


@pytest.mark.parametrize("endpoint", ["~", "dummy.com :123", "~:123", ":123"])
def test_torch_invalid_hostname_raises_torchs_hostname_message(endpoint: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(hostname_prefix(endpoint))}"):
        parse_rendezvous_endpoint(endpoint, 123)


@pytest.mark.parametrize(
    "endpoint",
    ["dummy.com:", "dummy.com:abc", "dummy.com:-123", "dummy.com:-", "dummy.com:65536", "d:70000"],
)
def test_torch_invalid_port_raises_torchs_port_message(endpoint: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(port_prefix(endpoint))}"):
        parse_rendezvous_endpoint(endpoint, 123)


def test_torch_config_string_is_read_into_a_dict() -> None:
    config = " b= dummy2  ,c=dummy3=dummy4,  a =dummy1,d=dummy5/dummy6"
    assert parse_rendezvous_config(config) == {
        "a": "dummy1",
        "b": "dummy2",
        "c": "dummy3=dummy4",
        "d": "dummy5/dummy6",
    }


@pytest.mark.parametrize("config", ["", "   "])
def test_torch_blank_config_string_gives_an_empty_dict(config: str) -> None:
    assert parse_rendezvous_config(config) == {}


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("a=dummy1,", "Item 2 ('') of 'a=dummy1,' is empty (a stray ',')"),
        ("a=dummy1,,c=dummy2", "Item 2 ('') of 'a=dummy1,,c=dummy2' is empty"),
        ("a=dummy1,   ,c=dummy2", "Item 2 ('   ')"),
        ("a=dummy1,=  ,c=dummy2", "Item 2 ('=  ') of 'a=dummy1,=  ,c=dummy2' has nothing before"),
        ("a=dummy1, = ,c=dummy2", "has nothing before '='"),
        ("a=dummy1,  =,c=dummy2", "has nothing before '='"),
        (" ,  ", "Item 1 ('') of ',' is empty"),
    ],
)
def test_torch_config_item_without_key_raises_torchs_format_message(
    config: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=starts_with(CONFIG_FORMAT, reason)):
        parse_rendezvous_config(config)


@pytest.mark.parametrize(
    ("config", "reason"),
    [
        ("b=dummy1,a,c=dummy2", "Item 2 ('a') of 'b=dummy1,a,c=dummy2' has no '='"),
        ("b=dummy1,c=dummy2,a", "Item 3 ('a') of 'b=dummy1,c=dummy2,a' has no '='"),
        ("b=dummy1,a=,c=dummy2", "Item 2 ('a=') of 'b=dummy1,a=,c=dummy2' has nothing after"),
        ("  a ", "Item 1 ('a') of 'a' has no '='"),
        ("a= ,b=1", "Item 1 ('a= ') of 'a= ,b=1' has nothing after '='"),
    ],
)
def test_torch_config_option_without_value_raises_torchs_value_message(
    config: str, reason: str
) -> None:
    with pytest.raises(ValueError, match=starts_with(config_value_prefix("a"), reason)):
        parse_rendezvous_config(config)


def test_config_later_duplicate_key_overwrites_the_earlier_one() -> None:
    assert parse_rendezvous_config("a=1,b=2,a=3") == {"a": "3", "b": "2"}


def test_config_of_the_wrong_type_raises_type_error() -> None:
    with pytest.raises(TypeError, match="must be a str, got None"):
        parse_rendezvous_config(None)  # type: ignore[arg-type]


def test_torch_try_parse_port_returns_the_port() -> None:
    assert try_parse_port("123") == 123


@pytest.mark.parametrize("text", ["", "   ", "  1", "1  ", " 1 ", "abc", "+1", "123456", "\u0663"])
def test_torch_try_parse_port_returns_none_for_anything_but_1_to_5_ascii_digits(
    text: str,
) -> None:
    assert try_parse_port(text) is None


def test_try_parse_port_leaves_the_range_check_to_the_caller() -> None:
    assert try_parse_port("99999") == 99999
    assert try_parse_port("00080") == 80


def test_try_parse_port_rejects_a_trailing_newline_unlike_torch() -> None:
    assert try_parse_port("1\n") is None


def test_try_parse_port_of_the_wrong_type_raises_type_error() -> None:
    with pytest.raises(TypeError, match="try_parse_port expects a str, got int: 80"):
        try_parse_port(80)  # type: ignore[arg-type]


def test_endpoint_module_is_pure_and_imports_no_io() -> None:
    tree = ast.parse(Path(rdzv.endpoint.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported == {"__future__", "ipaddress", "re"}


# --- properties --------------------------------------------------------------------------------

LABEL_CHARS = st.characters(categories=("Lu", "Ll", "Nd")) | st.sampled_from("_-")
labels = st.text(LABEL_CHARS, min_size=1, max_size=63)
hostnames = st.builds(
    lambda parts, dot: ".".join(parts) + dot,
    st.lists(labels, min_size=1, max_size=4),
    st.sampled_from(["", "."]),
).filter(lambda name: len(name.removesuffix(".")) <= 253)
ipv4s = st.ip_addresses(v=4).map(str)
ipv6s = st.one_of(
    st.ip_addresses(v=6).map(str),
    st.ip_addresses(v=6).map(lambda address: address.exploded),
    st.builds(
        lambda address, zone: f"{address}%{zone}",
        st.ip_addresses(v=6),
        st.from_regex(r"[A-Za-z0-9_.-]{1,15}", fullmatch=True),
    ),
)
ports = st.integers(min_value=0, max_value=65535)
padding = st.sampled_from(["", " ", "\t", "\n ", "\u3000"])


def format_endpoint(host: str, port: int | None) -> str:
    written = f"[{host}]" if ":" in host else host
    return written if port is None else f"{written}:{port}"


valid_endpoints = st.builds(format_endpoint, st.one_of(hostnames, ipv4s, ipv6s), st.none() | ports)


@given(
    host=st.one_of(hostnames, ipv4s, ipv6s),
    port=st.none() | ports,
    left=padding,
    right=padding,
)
def test_formatted_host_and_port_parse_back_to_themselves(
    host: str, port: int | None, left: str, right: str
) -> None:
    endpoint = f"{left}{format_endpoint(host, port)}{right}"
    expected = (host, DEFAULT if port is None else port)
    assert parse_rendezvous_endpoint(endpoint, DEFAULT) == expected


@given(port=ports, digits=st.integers(min_value=1, max_value=5))
def test_port_with_leading_zeros_reads_as_its_number_up_to_five_digits(
    port: int, digits: int
) -> None:
    assert try_parse_port(str(port).zfill(digits)) == port
    assert try_parse_port(str(port).zfill(6)) is None


FRAGMENTS = [
    *"[]:.%_- \t\n~",
    "::",
    "::1",
    "fe80",
    "eth0",
    "h",
    "a.b",
    "..",
    "0",
    "80",
    "65535",
    "65536",
    "123456",
    "1.2.3.4",
    "\u0663",
    "ö",
    "a" * 64,
]
ENDPOINT_ALPHABET = "[]:.0123456789abcdef %_-"
arbitrary_endpoints = st.one_of(
    st.text(),
    st.binary().map(lambda raw: raw.decode("utf-8", errors="replace")),
    st.text(alphabet=ENDPOINT_ALPHABET),
    st.lists(st.sampled_from(FRAGMENTS), max_size=8).map("".join),
    st.builds(lambda h, p: f"[{h}]:{p}", st.text(ENDPOINT_ALPHABET), st.text("0123456789")),
    # Valid endpoints with one tricky character inserted somewhere.
    st.builds(
        lambda endpoint, char, at: endpoint[:at] + char + endpoint[at:],
        valid_endpoints,
        st.sampled_from("[]:%.\n \t_-~/@*0\u0663\u00f6"),
        st.integers(min_value=0, max_value=80),
    ),
    # Bracketed IPv6 addresses with arbitrary zone ids and port parts.
    st.builds(
        lambda address, zone, port: f"[{address}%{zone}]{port}",
        st.ip_addresses(v=6),
        st.text(max_size=6),
        st.sampled_from(["", ":", ":1", ":65536", ":x"]),
    ),
)


def parse_or_error(endpoint: str) -> tuple[str, int] | ValueError:
    try:
        return parse_rendezvous_endpoint(endpoint, DEFAULT)
    except ValueError as exc:
        return exc


@settings(max_examples=400)
@given(endpoint=arbitrary_endpoints)
def test_arbitrary_text_either_parses_to_a_usable_endpoint_or_raises_value_error(
    endpoint: str,
) -> None:
    result = parse_or_error(endpoint)  # any other exception fails the test
    if isinstance(result, ValueError):
        assert str(result).startswith(("The port number of", "The hostname of"))
        return
    host, port = result
    assert host
    assert host == host.strip()
    assert 0 <= port <= 65535
    if ":" in host:
        ipaddress.IPv6Address(host)
    # A parsed endpoint, written back in canonical form, parses to the same result.
    assert parse_rendezvous_endpoint(format_endpoint(host, port), -1) == (host, port)


@settings(max_examples=200)
@given(config=st.one_of(st.text(), st.text(alphabet="ab=, \t\n")))
def test_arbitrary_config_text_either_parses_or_raises_value_error(config: str) -> None:
    try:
        options = parse_rendezvous_config(config)
    except ValueError as exc:
        assert str(exc).startswith((CONFIG_FORMAT, "The rendezvous configuration option '")), str(
            exc
        )
        return
    for key, value in options.items():
        assert key == key.strip()
        assert value == value.strip()
        assert key
        assert value
        assert "," not in key + value


# --- differential test against torch's parser --------------------------------------------------


@pytest.fixture(scope="module")
def torch_utils() -> ModuleType:
    utils: ModuleType = pytest.importorskip("torch.distributed.elastic.rendezvous.utils")
    return utils


def is_valid_dns_name(host: str) -> bool:
    name = host.removesuffix(".")
    return len(name) <= 253 and all(1 <= len(label) <= 63 for label in name.split("."))


ZONE_ENDPOINT = re.compile(r"\[([^\[\]%]+%[A-Za-z0-9_.-]+)\](?::([0-9]{1,5}))?")


def zone_endpoint(stripped: str) -> tuple[str, int] | None:
    """Deviation 2: the (host, port) rdzv must return for a bracketed IPv6 with a zone id."""
    match = ZONE_ENDPOINT.fullmatch(stripped)
    if match is None:
        return None
    host, port_text = match.groups()
    try:
        ipaddress.IPv6Address(host)
    except ValueError:
        return None
    port = DEFAULT if port_text is None else int(port_text)
    return (host, port) if port <= 65535 else None


def documented_deviation(endpoint: str, torch_result: tuple[str, int] | ValueError) -> str | None:
    """Which documented deviation (rdzv/endpoint.py docstring) applies to ``endpoint``.

    Returns None when rdzv must behave exactly like torch.
    """
    stripped = endpoint.strip()
    if isinstance(torch_result, ValueError):
        return "accepts-zone-id" if zone_endpoint(stripped) is not None else None
    host, _ = torch_result
    if not stripped:
        return None
    if host.endswith("\n"):
        return "rejects-trailing-newline"  # deviation 4
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "rejects-colon-in-host"  # deviation 1: not an IPv6 address at all
        return None if stripped.startswith("[") else "rejects-colon-in-host"
    return None if is_valid_dns_name(host) else "rejects-bad-dns-name"  # deviation 3


@pytest.mark.torch
@settings(max_examples=1500)
@given(endpoint=arbitrary_endpoints)
@example(endpoint="::1")
@example(endpoint="[fe80::1%eth0]:1")
@example(endpoint="[fe80::1%a b]:1")
@example(endpoint="h\n:1")
@example(endpoint="a..b")
def test_endpoint_matches_torch_except_for_documented_deviations(
    torch_utils: ModuleType, endpoint: str
) -> None:
    try:
        theirs: tuple[str, int] | ValueError = torch_utils.parse_rendezvous_endpoint(
            endpoint, DEFAULT
        )
    except ValueError as exc:
        theirs = exc
    ours = parse_or_error(endpoint)
    deviation = documented_deviation(endpoint, theirs)
    if deviation is None and isinstance(theirs, ValueError):
        assert isinstance(ours, ValueError), f"torch rejects {endpoint!r}, rdzv gave {ours}"
        assert str(ours).startswith(f"{theirs} "), "rdzv must start with torch's message"
    elif deviation is None:
        assert ours == theirs
    elif deviation == "accepts-zone-id":
        assert ours == zone_endpoint(endpoint.strip())
    else:
        assert isinstance(ours, ValueError), f"{deviation}: rdzv accepted {endpoint!r}"
        assert str(ours).startswith(hostname_prefix(endpoint.strip()))


@pytest.mark.torch
@pytest.mark.parametrize(("endpoint", "torch_result", "reason"), REJECTED_UNLIKE_TORCH)
def test_listed_deviation_rows_are_what_torch_really_returns(
    torch_utils: ModuleType, endpoint: str, torch_result: tuple[str, int], reason: str
) -> None:
    del reason
    assert torch_utils.parse_rendezvous_endpoint(endpoint, DEFAULT) == torch_result
    assert documented_deviation(endpoint, torch_result) is not None


@pytest.mark.torch
@settings(max_examples=400)
@given(config=st.one_of(st.text(), st.text(alphabet="ab=, \t\n")))
def test_config_matches_torch(torch_utils: ModuleType, config: str) -> None:
    try:
        theirs: dict[str, str] | ValueError = torch_utils._parse_rendezvous_config(config)
    except ValueError as exc:
        theirs = exc
    try:
        ours: dict[str, str] | ValueError = parse_rendezvous_config(config)
    except ValueError as exc:
        ours = exc
    if isinstance(theirs, ValueError):
        assert isinstance(ours, ValueError)
        assert str(ours).startswith(f"{theirs} ")
    else:
        assert ours == theirs


@pytest.mark.torch
@settings(max_examples=400)
@given(text=st.one_of(st.text(), st.text(alphabet="0123456789 \n+-a\u0663")))
def test_try_parse_port_matches_torch_except_a_trailing_newline(
    torch_utils: ModuleType, text: str
) -> None:
    theirs = torch_utils._try_parse_port(text)
    if re.fullmatch(r"[0-9]{1,5}\n", text):
        assert theirs == int(text)  # torch's `$` also matches before a final newline
        assert try_parse_port(text) is None  # deviation 4
    else:
        assert try_parse_port(text) == theirs
