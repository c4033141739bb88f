"""Parse rendezvous endpoints (``host[:port]``) and configuration strings (``k=v,...``).

The functions mirror torch's ``parse_rendezvous_endpoint``, ``_parse_rendezvous_config`` and
``_try_parse_port`` (``torch.distributed.elastic.rendezvous.utils``): they accept what torch
accepts, check in the same order, and every ``ValueError`` starts with torch's sentence for the
same fault (so code matching torch's messages keeps working), followed by the specific reason.
The module is pure: no sockets, no DNS, no clock.

Accepted endpoint forms: ``host``, ``host:port``, ``[ipv6]``, ``[ipv6]:port``; ``None``, empty
or whitespace-only gives ``("localhost", default_port)``. Surrounding whitespace is stripped.
``default_port`` is returned as given, unchecked, as in torch (torch's callers pass ``-1`` as
a "no port given" sentinel).

Deliberate deviations from torch 2.13 (the differential test in
``tests/rdzv/test_endpoint.py`` enumerates exactly these):

1. **A host containing ':' must be a valid IPv6 address in brackets.** torch splits an
   unbracketed endpoint at its last ':', so ``"::1"`` silently becomes ``(":", 1)``,
   ``"fe80::1"`` becomes ``("fe80:", 1)`` and ``"h:1:2"`` becomes ``("h:1", 2)``; inside
   brackets it takes any text of its host alphabet (``"[h:1]"``, ``"[:::]"``). rdzv rejects
   these with a message that shows the bracketed spelling. It rejects rather than guessing,
   because an unbracketed IPv6 endpoint is ambiguous: ``"::1:80"`` is both the address
   ``::1:80`` and "``::1`` port 80" (torch reads the latter); treating it as an address would
   silently change torch's meaning, keeping torch's reading keeps the ``(":", 1)`` trap.
   Brackets are the standard spelling (RFC 3986) and the fix is a one-character edit.
2. **IPv6 zone ids are accepted in brackets**: ``"[fe80::1%eth0]:1"`` gives
   ``("fe80::1%eth0", 1)`` (torch rejects '%'). Link-local addresses are unusable without a
   zone, and ``socket.getaddrinfo`` understands the ``%zone`` suffix. The zone must be ASCII
   letters, digits, '_', '.' or '-' (interface names or numeric indices). Unbracketed,
   ``"fe80::1%eth0"`` stays a port error, as in torch, with a hint to add brackets.
3. **DNS name limits are enforced**: every dot-separated label of a host name must be 1-63
   characters and the whole name at most 253 (one trailing dot allowed), so ``"a..b"``,
   ``"."``, ``".a"`` and over-long names are rejected (torch accepts them). Python encodes a
   host name with the IDNA codec before resolving it, and that codec raises ``UnicodeError``,
   not ``OSError``, for empty or over-long labels, so such names would fail later, at
   connect time, with an error that retry logic does not expect. Lengths are counted in
   characters as written; the IDNA form of a non-ASCII label may be longer, and the resolver
   checks that.
4. **Full-string matching.** torch's regexes end in ``$``, which also matches before a final
   newline, so torch accepts the host ``"h\\n"`` (from ``"h\\n:1"`` or ``"[h\\n]"``) and
   ``_try_parse_port("1\\n") == 1``. rdzv matches the whole string: that host is rejected
   and :func:`try_parse_port` returns ``None``.
5. **Wrong argument types raise ``TypeError``** (torch fails with ``AttributeError`` or
   worse). ``None`` stays a valid endpoint.

Error messages name the whole (stripped) input, as torch's do, then say what is wrong with
which part.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ipaddress

__all__ = ["parse_rendezvous_config", "parse_rendezvous_endpoint", "try_parse_port"]

# torch's sentences, verbatim; "{endpoint}" / "{key}" are filled with str.format.
_PORT_RULE = " ".join(
    (
        "The port number of the rendezvous endpoint '{endpoint}' must be an integer",
        "between 0 and 65536.",
    )
)
_HOSTNAME_RULE = " ".join(
    (
        "The hostname of the rendezvous endpoint '{endpoint}' must be a dot-separated list",
        "of labels, an IPv4 address, or an IPv6 address.",
    )
)
_CONFIG_FORMAT_RULE = " ".join(
    (
        "The rendezvous configuration string must be in format",
        "<key1>=<value1>,...,<keyN>=<valueN>.",
    )
)
_CONFIG_VALUE_RULE = "The rendezvous configuration option '{key}' must have a value specified."

_MAX_PORT = 65535
_MAX_LABEL_LENGTH = 63
_MAX_NAME_LENGTH = 253
_PORT_PATTERN = re.compile(r"[0-9]{1,5}")  # ASCII digits only; used with fullmatch
_HOST_PATTERN = re.compile(r"[\w.:-]+")  # torch's host alphabet (Unicode \w); fullmatch
_HOST_CHAR = re.compile(r"[\w.:-]")
_ZONE_PATTERN = re.compile(r"[A-Za-z0-9_.-]+")


def try_parse_port(s: str) -> int | None:
    """Read a port number written as 1-5 ASCII digits.

    The range is not checked (``"99999"`` gives 99999); the caller does that, as in torch.

    Args:
        s: the text after the last ':' of an endpoint.

    Returns:
        The number, or ``None`` when ``s`` is not 1-5 ASCII digits (whitespace, signs and
        non-ASCII digits included).

    Raises:
        TypeError: ``s`` is not a ``str``.
    """
    if not isinstance(s, str):
        raise TypeError(f"try_parse_port expects a str, got {type(s).__name__}: {s!r}")
    if _PORT_PATTERN.fullmatch(s) is None:
        return None
    return int(s)


def parse_rendezvous_endpoint(endpoint: str | None, default_port: int) -> tuple[str, int]:
    """Split a rendezvous endpoint into host and port, checking both.

    Args:
        endpoint: ``host``, ``host:port``, ``[ipv6]`` or ``[ipv6]:port``, with optional
            surrounding whitespace; ``None`` or blank means ``localhost``.
        default_port: the port to return when the endpoint names none (returned unchecked).

    Returns:
        ``(host, port)``; an IPv6 host is returned without its brackets, as written.

    Raises:
        TypeError: ``endpoint`` is neither ``str`` nor ``None``.
        ValueError: the port is not 1-5 digits or is above 65535 (message starts with
            torch's "The port number of the rendezvous endpoint ..."), or the host is empty,
            has a character outside letters, digits, '_', '.', '-', is an IPv6 address
            without brackets, is not a valid IPv6 address inside brackets, or breaks the DNS
            length limits (message starts with torch's "The hostname of the rendezvous
            endpoint ..."). Every message quotes the endpoint and says what is wrong.
    """
    if endpoint is None:
        return ("localhost", default_port)
    if not isinstance(endpoint, str):
        raise TypeError(f"The rendezvous endpoint must be a str or None, got {endpoint!r}")
    text = endpoint.strip()
    if not text:
        return ("localhost", default_port)

    raw_host, port_text = _split(text)
    bracketed = len(raw_host) > 1 and raw_host[0] == "[" and raw_host[-1] == "]"
    host = raw_host[1:-1] if bracketed else raw_host

    # Port before host, as in torch, so both fail with the same sentence on the same input.
    port = default_port if port_text is None else _check_port(text, port_text)
    _check_host(text, host, port_text, bracketed=bracketed)
    return (host, port)


def parse_rendezvous_config(config: str) -> dict[str, str]:
    """Read ``key1=value1,...,keyN=valueN`` into a dict, as torch does.

    Keys and values are stripped; a value may contain '='; a later duplicate key wins; a
    blank string gives ``{}``.

    Args:
        config: the configuration string.

    Returns:
        The options, in the order first seen.

    Raises:
        TypeError: ``config`` is not a ``str``.
        ValueError: an item has no key, e.g. a stray ',' (message starts with torch's "The
            rendezvous configuration string must be in format ..."), or an option has no
            value (message starts with torch's "The rendezvous configuration option '<key>'
            must have a value specified."). Messages quote the item and the string.
    """
    if not isinstance(config, str):
        raise TypeError(f"The rendezvous configuration must be a str, got {config!r}")
    text = config.strip()
    options: dict[str, str] = {}
    if not text:
        return options
    for position, item in enumerate(text.split(","), start=1):
        raw_key, equals, raw_value = item.partition("=")
        key = raw_key.strip()
        where = f"Item {position} ({item!r}) of {text!r}"
        if not key:
            what = "is empty (a stray ',')" if not item.strip() else "has nothing before '='"
            raise ValueError(f"{_CONFIG_FORMAT_RULE} {where} {what}.")
        value = raw_value.strip()
        if not value:
            what = "has no '='" if not equals else "has nothing after '='"
            raise ValueError(f"{_CONFIG_VALUE_RULE.format(key=key)} {where} {what}.")
        options[key] = value
    return options


def _split(text: str) -> tuple[str, str | None]:
    """Split stripped, non-empty ``text`` into host part and port text, as torch does."""
    if text[0] == "[" and text[-1] == "]":
        return (text, None)
    head, colon, tail = text.rpartition(":")
    if not colon:
        return (text, None)
    return (head, tail)


def _check_port(text: str, port_text: str) -> int:
    port = try_parse_port(port_text)
    if port is not None and port <= _MAX_PORT:
        return port
    if not port_text:
        reason = "Nothing follows the last ':'."
    elif port is not None:
        reason = f"{port} is larger than {_MAX_PORT}, the largest port number."
    elif port_text.isascii() and port_text.isdigit():
        reason = f"{port_text!r} has {len(port_text)} digits; a port has at most 5."
    else:
        reason = f"{port_text!r} (after the last ':') is not a number of ASCII digits."
    if not text.startswith("[") and _parse_ipv6(text) is not None:
        hint = f"If {text!r} is an IPv6 address, enclose it in brackets: '[{text}]'."
        reason = f"{reason} {hint}"
    raise ValueError(f"{_PORT_RULE.format(endpoint=text)} {reason}")


def _check_host(text: str, host: str, port_text: str | None, *, bracketed: bool) -> None:
    if _HOST_PATTERN.fullmatch(host) is None:
        if bracketed and "%" in host and _parse_ipv6(host) is not None:
            return  # deviation 2: a zone id
        reason = _alphabet_reason(text, host, bracketed=bracketed)
    elif ":" in host:
        if bracketed and _parse_ipv6(host) is not None:
            return
        reason = _colon_reason(text, host, port_text, bracketed=bracketed)
    else:
        problem = _dns_name_problem(host)
        if problem is None:
            return
        reason = problem
    raise ValueError(f"{_HOSTNAME_RULE.format(endpoint=text)} {reason}")


def _alphabet_reason(text: str, host: str, *, bracketed: bool) -> str:
    if not host:
        return "The brackets are empty." if bracketed else "The host (before ':') is empty."
    if host.startswith("[") and "]" not in text:
        return "The '[' that opens the host has no closing ']'."
    if "[" in host or "]" in host:
        return " ".join(
            (
                f"The host {host!r} has a stray bracket;",
                "brackets must enclose the whole host, as in '[::1]' or '[::1]:29400'.",
            )
        )
    address, percent, zone = host.partition("%")
    if bracketed and percent and _parse_ipv6(address) is not None:
        return " ".join(
            (
                f"The zone id {zone!r} of {host!r} must be an interface name or index",
                "made of ASCII letters, digits, '_', '.' and '-'.",
            )
        )
    bad = next(char for char in host if _HOST_CHAR.fullmatch(char) is None)
    return " ".join(
        (
            f"The host {host!r} contains {bad!r} (U+{ord(bad):04X});",
            "a host may contain only letters, digits, '_', '.', '-', and ':' inside brackets.",
        )
    )


def _colon_reason(text: str, host: str, port_text: str | None, *, bracketed: bool) -> str:
    if bracketed:
        return f"{host!r} is in brackets but is not a valid IPv6 address: {_ipv6_error(host)}."
    whole_is_ipv6 = _parse_ipv6(text) is not None
    host_is_ipv6 = _parse_ipv6(host) is not None
    if whole_is_ipv6 and host_is_ipv6:
        return " ".join(
            (
                f"{text!r} is ambiguous: an IPv6 address must be in brackets.",
                f"Write '[{host}]:{port_text}' for {host} port {port_text},",
                f"or '[{text}]' for the address {text} on the default port.",
            )
        )
    if whole_is_ipv6:
        return " ".join(
            (
                f"{text!r} looks like an IPv6 address without brackets.",
                f"Write '[{text}]', or '[{text}]:PORT' to give a port.",
            )
        )
    if host_is_ipv6:
        return " ".join(
            (
                f"{host!r} looks like an IPv6 address without brackets.",
                f"Write '[{host}]:{port_text}'.",
            )
        )
    return f"The host {host!r} contains ':'; only an IPv6 address in brackets may contain ':'."


def _dns_name_problem(host: str) -> str | None:
    name = host.removesuffix(".")
    if len(name) > _MAX_NAME_LENGTH:
        return f"The host is {len(name)} characters long; a DNS name has at most 253."
    for label in name.split("."):
        if not label:
            return " ".join(
                (
                    f"The host {host!r} has an empty label (a leading dot or two dots in a row);",
                    "every dot-separated label needs 1 to 63 characters.",
                )
            )
        if len(label) > _MAX_LABEL_LENGTH:
            return " ".join(
                (
                    f"The label {label[:16]!r}... of the host is {len(label)} characters long;",
                    "a DNS label has at most 63.",
                )
            )
    return None


def _parse_ipv6(text: str) -> ipaddress.IPv6Address | None:
    """The IPv6 address ``text`` spells (an optional ``%zone`` allowed), or None."""
    import ipaddress  # lazy: only IPv6 endpoints and error messages need it

    try:
        address = ipaddress.IPv6Address(text)
    except ValueError:
        return None
    zone = address.scope_id
    if zone is not None and _ZONE_PATTERN.fullmatch(zone) is None:
        return None
    return address


def _ipv6_error(text: str) -> str:
    """Why ``ipaddress`` rejects ``text`` (called only for text it rejects)."""
    import ipaddress  # lazy: an error message's detail

    try:
        ipaddress.IPv6Address(text)
    except ValueError as exc:
        return str(exc)
    return "its zone id is not an interface name or index"
