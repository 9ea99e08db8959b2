"""One subject normaliser (core/protocol/subjects.py): the approval tool, the egress gate, grants and every
revoke path agree on what a name is, and on the names no approval can ever allow."""

from __future__ import annotations

import pytest

from chat_approvals.core.clock import ManualClock
from chat_approvals.core.models import Grant
from chat_approvals.core.protocol.subjects import (
    NeverAllowable,
    canonical_host,
    host_of,
    normalize_host,
    normalize_package,
)
from chat_approvals.core.sandbox.egress import Gate, GateConfig
from chat_approvals.core.sandbox.egress.policy import Pattern
from chat_approvals.store.aio import StoreIO
from tests.conftest import make_approvals
from tests.core.test_rules_tool import approvals_for, ask, ask_then_echo
from tests.support.gate_support import FakeGrants

# (what the model or the script names, the one canonical name, or None when it can never be approved)
HOSTS = [
    ("Files.Test", "files.test"),
    ("files.test.", "files.test"),
    ("1.1.1.1", "1.1.1.1"),
    ("127.0.0.1", None),
    ("127.1", None),  # the resolver reads these as 127.0.0.1
    ("0x7f.0.0.1", None),
    ("2130706433", None),
    ("10.0.0.7", None),
    ("169.254.169.254", None),
    ("192.168.1.1", None),
    ("[::1]", None),
    ("[2606:4700::1111]", None),  # IPv6 literals: host names only
]
JUNK = ["files_test.example", "files.test..", "a..b", "-x.test", "x.123", ""]


@pytest.mark.parametrize(("raw", "want"), HOSTS)
async def test_tool_and_gate_agree_on_hosts(raw: str, want: str | None) -> None:
    url = f"http://{raw}/data.csv"
    gate = await Gate(GateConfig(), backend=FakeGrants(), clock=ManualClock()).start()
    try:
        run = gate.open_run(user="u", chat="c", turn_id="t")
        name = canonical_host(raw)
        if want is None:
            with pytest.raises(NeverAllowable):
                host_of(url)
            refusal = await gate.decide(run, "site", name, 80, url)
            assert (refusal is not None and "allow" in refusal) or "IPv6" in str(refusal)
            assert run.blocked_subjects() == [] and run.denied_subjects() == [name]  # refused as such
            assert gate.backend.refusals == []  # type: ignore[union-attr]  # never recorded for a card
        else:
            assert host_of(url) == want == normalize_host(raw) == name
            assert await gate.decide(run, "site", name, 80, url) is not None
            assert run.blocked_subjects() == [want]  # the name the card will show is the tool's name
    finally:
        await gate.close()


@pytest.mark.parametrize("raw", JUNK)
def test_junk_hosts_are_refused_by_tool_gate_and_lists(raw: str) -> None:
    with pytest.raises(ValueError):
        host_of(f"http://{raw}/x")
    with pytest.raises(ValueError):
        canonical_host(raw)  # the gate answers 400 for these
    with pytest.raises(ValueError):
        Pattern.parse(raw or " ")


def test_packages_normalise_one_way() -> None:
    assert normalize_package("Zope.Interface") == normalize_package("zope_interface") == "zope-interface"
    assert Pattern.parse("package:Zope.Interface").name == "zope-interface"
    for bad in ["%2e%2e", "..", "a/b", "-x", "", "x y"]:
        with pytest.raises(NeverAllowable):
            normalize_package(bad)


async def test_tool_refuses_never_allowable_subjects_and_offers_no_card(store: StoreIO, clock: ManualClock) -> None:
    for bad in [ask(urls=["http://127.0.0.1:8080/x"]), ask(urls=["http://[::1]/x"]), ask(packages=["%2e%2e"]),
                ask(urls=["http://0x7f.1/x"])]:  # fmt: skip
        a = approvals_for(store, clock, ask_then_echo([bad]))
        turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
        assert turn.status == "answered" and turn.text.startswith("error:Invalid approval request:"), turn.text
    assert store.rows.get_pointer("c") is None  # no card for any of them
    a = approvals_for(store, clock, ask_then_echo([ask(packages=["Zope.Interface"], urls=["http://Files.Test./a"])]))
    turn = await a.run_turn(chat="c", user="u", text="go", platform="http")
    assert turn.offer is not None
    assert (turn.offer.card.sites, turn.offer.card.packages) == (["files.test"], ["zope-interface"])


async def test_every_revoke_spelling_revokes_the_grant(store: StoreIO, clock: ManualClock) -> None:
    """`/approvals revoke zope.interface` (every front end calls this one path) takes `zope-interface`."""
    from tests.support.agents import Counter, scripted_factory

    a = make_approvals(store, clock, scripted_factory(Counter()))

    def grant(kind: str, name: str) -> None:
        g = Grant(user="u", chat="c", kind=kind, name=name, card_id="k", created_at=0, expires_at=1e12)  # type: ignore[arg-type]
        store.rows.put_grant(g, 2e12)

    for spelling, kind, name in [
        ("zope.interface", "package", "zope-interface"),
        ("Zope_Interface", "package", "zope-interface"),
        ("package:ZOPE.interface", "package", "zope-interface"),
        ("Files.Test.", "site", "files.test"),
    ]:
        grant(kind, name)
        removed = await a.revoke(user="u", chat="c", subject=spelling)
        assert [(g.kind, g.name) for g in removed] == [(kind, name)], spelling
    grant("site", "files.test")
    assert await a.revoke(user="u", chat="c", subject="package:files.test") == []  # a package revoke, not a site
    assert await a.revoke(user="u", chat="c", subject="%2e%2e") == []
    assert [g.name for g in await a.revoke(user="u", chat="c", subject="all")] == ["files.test"]


async def test_gate_tool_and_revoke_agree_through_the_grant_book(store: StoreIO, clock: ManualClock) -> None:
    """The name the tool puts on the card is the grant the gate finds for any spelling of the
    host the sandbox uses, and a revoke in any spelling takes it away from the gate (R14, R18)."""
    from tests.support.agents import Counter, scripted_factory

    a = make_approvals(store, clock, scripted_factory(Counter()))
    site, package = host_of("http://Files.Test./a"), normalize_package("Zope.Interface")
    for kind, name in [("site", site), ("package", package)]:
        g = Grant(user="u", chat="c", kind=kind, name=name, card_id="k", created_at=0, expires_at=1e12)  # type: ignore[arg-type]
        store.rows.put_grant(g, 2e12)
    gate = await Gate(GateConfig(), backend=a.gate_backend, clock=clock).start()
    try:
        run = gate.open_run(user="u", chat="c", turn_id="t")
        assert await gate.decide(run, "site", canonical_host("FILES.test."), 80, "http://FILES.test./a") is None
        assert await gate.decide(run, "package", normalize_package("zope_interface"), None, None) is None
        assert [g.name for g in await a.revoke(user="u", chat="c", subject="Files.TEST")] == ["files.test"]
        assert [g.name for g in await a.revoke(user="u", chat="c", subject="ZOPE_interface")] == ["zope-interface"]
        assert await gate.decide(run, "site", canonical_host("files.test"), 80, "http://files.test/a") is not None
        assert await gate.decide(run, "package", "zope-interface", None, None) is not None
    finally:
        await gate.close()


def test_never_allowable_reason_tells_names_from_ip_literals_as_ipaddress_does() -> None:
    """The shortcut for names (no colon, not only digits and dots) answers as the full parse does."""
    import ipaddress

    from chat_approvals.core.protocol.subjects import never_allowable_reason

    def by_parse(host: str) -> bool:  # what the shortcut stands for: ip_address refuses it
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return False
        return True

    for host in ["data.example.org", "", ".", "1.2.3", "1.2.3.4.5", "01.2.3.4", "1.2.3.4", "10.0.0.1", "8.8.8.8",
                 "127.0.0.1", "::1", "fe80::1%eth0", "2001:4860:4860::8888", "\u0661.\u0662.\u0663.\u0664", "1..2.3",
                 "1.2.3.4.", "x1.2.3.4", "169.254.1.1", "255.255.255.255"]:  # fmt: skip
        assert (never_allowable_reason(host) is not None) <= by_parse(host), host
        if not by_parse(host):
            assert never_allowable_reason(host) is None, host
    assert never_allowable_reason("127.0.0.1") and never_allowable_reason("::1") and never_allowable_reason("10.0.0.1")
    assert never_allowable_reason("8.8.8.8") is None and never_allowable_reason("data.example.org") is None
