"""R14: grants, one row per approved site or package, for one user in one chat."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.card_kinds import grants_to_write
from core.models import Answer, AuditEvent, Grant, Pointer, SubjectKind
from core.subjects import subject_matches

if TYPE_CHECKING:
    from core.approvals import Approvals


class GrantBook:
    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    async def apply(self, p: Pointer, user: str, answer: Answer, now: float) -> None:
        """Approve writes a row per approved subject stamped with the card id; what the answer
        does not approve has its stored rows removed. A tool card approved once writes nothing."""
        store, settings = self.approvals.store, self.approvals.settings
        writes = set(grants_to_write(p.card, answer))
        for kind, name in p.card.subjects():
            if (kind, name) in writes:
                grant = Grant(
                    user=p.owner,
                    chat=p.chat,
                    kind=kind,
                    name=name,
                    card_id=p.card_id,
                    created_at=now,
                    expires_at=now + settings.grant_ttl,
                )
                await store.run(store.rows.put_grant, grant, grant.expires_at + settings.retention)
                await self._audit(p.chat, now, "grant", user, p.card_id, kind, name)
            elif answer.approved and kind == "tool":
                continue  # approved once: this call runs; nothing to write, nothing to take back
            elif await store.run(store.rows.delete_grant, p.owner, p.chat, kind, name):
                await self._audit(p.chat, now, "revoke", user, p.card_id, kind, name)

    async def live(self, user: str, chat: str | None) -> list[Grant]:
        store = self.approvals.store
        return await store.run(store.rows.list_grants, user, chat, self.approvals.clock.now())

    async def revoke(self, user: str, chat: str | None, subject: str) -> list[Grant]:
        """Revoke `subject` (a host, a package, or "all") in `chat`, or in every chat of the user."""
        store = self.approvals.store
        now = self.approvals.clock.now()
        removed = []
        for g in await self.live(user, chat):
            if subject_matches(g, subject) and await store.run(store.rows.delete_grant, g.user, g.chat, g.kind, g.name):
                removed.append(g)
                await self._audit(g.chat, now, "revoke", user, g.card_id, g.kind, g.name)
        return removed

    async def is_allowed(self, user: str, chat: str, kind: SubjectKind, name: str) -> bool:
        return any(g.kind == kind and g.name == name for g in await self.live(user, chat))

    async def _audit(
        self, chat: str, at: float, kind: str, actor: str, card_id: str, subject_kind: str, name: str
    ) -> None:
        event = AuditEvent(
            chat=chat,
            at=at,
            kind="grant" if kind == "grant" else "revoke",
            actor=actor,
            card_id=card_id,
            detail={"kind": subject_kind, "name": name},
        )
        store = self.approvals.store
        await store.run(store.rows.append_audit, event, at + self.approvals.settings.retention)
