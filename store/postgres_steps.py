"""The compound steps (begin_turn, end_turn, claim_grants) as ONE PostgreSQL statement each: one
round trip, and one implicit transaction, so the step applies whole or not at all.

Each conditional write is a data-modifying CTE whose WHERE carries its condition (the claim is
`UPDATE pointers ... WHERE <still claimable> RETURNING *`); the writes that depend on it (audit
events, outbox items, grant changes) are `INSERT ... SELECT ... WHERE EXISTS (SELECT 1 FROM
<that CTE>)`, so they happen only if it did. The audit events of a step go in one INSERT whose
rows are ordered, so their sequence numbers keep the step's order.

A statement's reads see the database as it was when the statement began, not its own CTEs'
writes: claim_grants therefore reads the owner's grants as they were and applies the step's own
changes to them here (what a read after the step would see). A step that changes the same grant
twice (two CTEs cannot both change one row) is done by the caller as a short transaction instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from chat_approvals.core.models import AuditWrite, ClaimWrite, Grant, SessionWrite

Sql = tuple[str, list[Any]]

POINTER_COLUMNS = (
    "chat, card_id, sh, state, expires_at, ttl, claim_count, worker, lease_until, resume_deadline, "
    "card_location, answer_key, doc, votes"
)
# put_pointer's condition (R7): the chat has no open request
PUT_POINTER = f"""INSERT INTO pointers ({POINTER_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)
   ON CONFLICT (chat) DO UPDATE SET card_id=excluded.card_id, sh=excluded.sh,
     state=excluded.state, expires_at=excluded.expires_at, ttl=excluded.ttl,
     claim_count=excluded.claim_count, worker=excluded.worker,
     lease_until=excluded.lease_until, resume_deadline=excluded.resume_deadline,
     card_location=excluded.card_location, answer_key=excluded.answer_key, doc=excluded.doc,
     votes=excluded.votes
   WHERE pointers.state IN ('done', 'expired')
      OR (pointers.expires_at <= %s
          AND NOT (pointers.state = 'claimed' AND pointers.lease_until >= %s))"""
CLAIM = """UPDATE pointers SET state = 'claimed', worker = %s, lease_until = %s, resume_deadline = %s,
     claim_count = claim_count + 1
   WHERE chat = %s AND card_id = %s AND sh = %s
     AND (state = 'pending' OR (state = 'claimed' AND lease_until < %s))
     AND expires_at > %s AND claim_count = %s
   RETURNING *"""
TAKE_TURN = """INSERT INTO turns (chat, holder, lease_until, ttl) VALUES (%s, %s, %s, %s)
   ON CONFLICT (chat) DO UPDATE SET holder = excluded.holder, lease_until = excluded.lease_until,
     ttl = excluded.ttl
   WHERE turns.lease_until < %s"""
PUT_SESSION = """INSERT INTO sessions (chat, key, seq, ttl) VALUES (%s, %s, %s, %s)
   ON CONFLICT (chat) DO UPDATE SET key = excluded.key, seq = excluded.seq, ttl = excluded.ttl
   WHERE sessions.seq <= excluded.seq"""
# a user's live grants in a chat, in list_grants' order (byte order: the same on every collation)
GRANTS_JSON = """(SELECT json_agg(g ORDER BY g.chat COLLATE "C", g.kind COLLATE "C", g.name COLLATE "C")
   FROM grants g WHERE g.usr = %s AND g.chat = %s AND g.expires_at > %s AND {cond})"""


def claim_args(w: ClaimWrite) -> list[Any]:
    r = w.read
    return [w.worker, w.lease_until, w.resume_deadline, r.chat, r.card_id, r.secret_hash, w.now, w.now, r.claim_count]


def pointer_args(columns: tuple[Any, ...], now: float) -> list[Any]:
    return [*columns, now, now]


def begin_turn(chat: str, holder: str, user: str, now: float, lease_until: float) -> Sql:
    taken = "EXISTS (SELECT 1 FROM t)"
    return (
        f"""WITH t AS ({TAKE_TURN} RETURNING chat)
            SELECT {taken} AS taken,
              (SELECT row_to_json(p) FROM pointers p WHERE p.chat = %s AND {taken}) AS pointer,
              {GRANTS_JSON.format(cond=taken)} AS grants,
              (SELECT s.key FROM sessions s WHERE s.chat = %s AND {taken}) AS session""",
        [chat, holder, lease_until, lease_until, now, chat, user, chat, now, chat],
    )


def _dependent_writes(
    writes: Sequence[tuple[AuditWrite, Grant | None]], cond: str, deleted: str | None
) -> tuple[list[str], list[Any]]:
    """The CTEs appending `writes` (in order) with their outbox items, each only if `cond` holds
    and, where a write names a grant, only if that grant is in `deleted` (a CTE's RETURNING)."""
    if not writes:
        return [], []
    ctes: list[str] = []
    args: list[Any] = []
    dep = (
        "(v.dep_usr IS NULL OR (v.dep_usr, v.dep_chat, v.dep_kind, v.dep_name)"
        " IN (SELECT usr, chat, kind, name FROM {d}))"
    )
    dep_sql = dep.format(d=deleted) if deleted else "v.dep_usr IS NULL"
    rows = []
    for i, (w, grant) in enumerate(writes):
        e = w.event
        # the order and a missing grant as literals: the statement's text is the same for a step's
        # shape, its parameters fewer (psycopg caches a query's parsing up to 50 of them)
        rows.append(f"({i}::int,%s::text,%s::float8,%s::text,%s::text,%s::text,%s::text,%s::float8,{_dep(grant)})")
        args += [e.chat, e.at, e.kind, e.actor, e.card_id, _detail(w), w.ttl, *_dep_args(grant)]
    ctes.append(
        f"""ev AS (INSERT INTO audit (chat, at, kind, actor, card_id, detail, ttl)
              SELECT v.chat, v.at, v.kind, v.actor, v.card_id, v.detail, v.ttl
              FROM (VALUES {", ".join(rows)})
                AS v(ord, chat, at, kind, actor, card_id, detail, ttl, dep_usr, dep_chat, dep_kind, dep_name)
              WHERE {cond} AND {dep_sql} ORDER BY v.ord)"""
    )
    items = []
    for w, grant in writes:
        for o in w.outbox:
            items.append(f"(%s::text,%s::text,%s::text,%s::text,%s::float8,{_dep(grant)})")
            args += [o.sink, o.id, o.chat, o.body, w.ttl, *_dep_args(grant)]
    if items:
        ctes.append(
            f"""ob AS (INSERT INTO outbox (sink, id, chat, body, ttl)
                  SELECT v.sink, v.id, v.chat, v.body, v.ttl
                  FROM (VALUES {", ".join(items)})
                    AS v(sink, id, chat, body, ttl, dep_usr, dep_chat, dep_kind, dep_name)
                  WHERE {cond} AND {dep_sql})"""
        )
    return ctes, args


def _dep(grant: Grant | None) -> str:
    return "%s::text,%s::text,%s::text,%s::text" if grant else "NULL::text,NULL::text,NULL::text,NULL::text"


def _dep_args(grant: Grant | None) -> tuple[str, ...]:
    return (grant.user, grant.chat, grant.kind, grant.name) if grant else ()


def _detail(w: AuditWrite) -> str:
    import json

    return json.dumps(w.event.detail)


def end_turn(
    chat: str,
    holder: str,
    now: float,
    pointer: tuple[Any, ...] | None,
    audit: Sequence[AuditWrite],
    session: SessionWrite | None,
) -> Sql:
    ctes: list[str] = []
    args: list[Any] = []
    if pointer is not None:
        ctes.append(f"p AS ({PUT_POINTER} RETURNING chat)")
        args += pointer_args(pointer, now)
        more, more_args = _dependent_writes([(a, None) for a in audit], "EXISTS (SELECT 1 FROM p)", None)
        ctes += more
        args += more_args
    if session is not None:
        ctes.append(f"s AS ({PUT_SESSION})")
        args += [session.chat, session.key, session.seq, session.ttl]
    ctes.append("r AS (DELETE FROM turns WHERE chat = %s AND holder = %s)")
    args += [chat, holder]
    written = "EXISTS (SELECT 1 FROM p)" if pointer is not None else "true"
    return f"WITH {', '.join(ctes)} SELECT {written} AS written", args


def grant_keys(w: ClaimWrite) -> list[tuple[str, str, str, str]]:
    return [(c.grant.user, c.grant.chat, c.grant.kind, c.grant.name) for c in w.changes]


def claim_grants(w: ClaimWrite) -> Sql:
    """The claim; only if won: the grant changes and the events (before, per change, after);
    then the claimed row, the owner's grants in the chat as they were before the changes, and
    the claimed card's snapshot when it is in the objects table."""
    won = "EXISTS (SELECT 1 FROM c)"
    ctes = [f"c AS ({CLAIM})"]
    args: list[Any] = claim_args(w)
    deletes = [ch for ch in w.changes if ch.delete]
    puts = [ch for ch in w.changes if not ch.delete]
    if deletes:
        keys = ", ".join("(%s,%s,%s,%s)" for _ in deletes)
        ctes.append(
            f"""d AS (DELETE FROM grants WHERE {won} AND (usr, chat, kind, name) IN ({keys})
                  RETURNING usr, chat, kind, name)"""
        )
        for ch in deletes:
            args += [ch.grant.user, ch.grant.chat, ch.grant.kind, ch.grant.name]
    if puts:
        values = ", ".join(
            "(%s::text,%s::text,%s::text,%s::text,%s::text,%s::float8,%s::float8,%s::float8,%s::text)" for _ in puts
        )
        ctes.append(
            f"""g AS (INSERT INTO grants (usr, chat, kind, name, card_id, created_at, expires_at, ttl, turn_id)
                  SELECT * FROM (VALUES {values}) AS v WHERE {won}
                  ON CONFLICT (usr, chat, kind, name) DO UPDATE SET card_id=excluded.card_id,
                    created_at=excluded.created_at, expires_at=excluded.expires_at, ttl=excluded.ttl,
                    turn_id=excluded.turn_id)"""
        )
        for ch in puts:
            g = ch.grant
            args += [g.user, g.chat, g.kind, g.name, g.card_id, g.created_at, g.expires_at, ch.ttl, g.turn_id]
    writes: list[tuple[AuditWrite, Grant | None]] = [(a, None) for a in w.before]
    writes += [(ch.audit, ch.grant if ch.delete else None) for ch in w.changes]
    writes += [(a, None) for a in w.after]
    more, more_args = _dependent_writes(writes, won, "d" if deletes else None)
    ctes += more
    args += more_args
    grants = """(SELECT json_agg(x ORDER BY x.chat COLLATE "C", x.kind COLLATE "C", x.name COLLATE "C")
                 FROM grants x, c WHERE x.usr = c.doc::json->>'owner' AND x.chat = c.chat)"""
    # the won card's snapshot, where objects live in this database: the click reads it next (it is
    # write-once, so this read now is the read it would make)
    snap = "(SELECT o.{col} FROM objects o, c WHERE o.key = c.doc::json->'snapshot'->>'key')"
    return (
        f"WITH {', '.join(ctes)} SELECT (SELECT row_to_json(c) FROM c) AS won, {grants} AS grants, "
        f"{snap.format(col='data')} AS snapshot_data, {snap.format(col='sha256')} AS snapshot_sha256",
        args,
    )


def fold(writes: Sequence[tuple[str, Sequence[Any]]], query: str, args: Sequence[Any]) -> Sql:
    """`writes` (plain INSERT/UPDATE/DELETE statements, no WITH of their own) as data-modifying
    CTEs in front of `query`: ONE statement, so one round trip and one implicit transaction (a
    CTE that fails, e.g. an object's key written before, fails the whole statement). A
    data-modifying CTE runs whether or not anything reads it; `query`'s rows and row count are the
    statement's, and `query` does not see the writes' rows (one snapshot for the statement): a
    step's puts are read by later steps, never by the statement they ride in."""
    ctes = ", ".join(f"w{i} AS ({q})" for i, (q, _) in enumerate(writes))
    head = query.lstrip()
    with_ = head[:4].upper() == "WITH" and head[4:5].isspace()  # its own CTEs follow ours
    text = f"WITH {ctes}, {head[5:]}" if with_ else f"WITH {ctes} {head}"
    return text, [*(a for _, w in writes for a in w), *args]


__all__ = ["CLAIM", "POINTER_COLUMNS", "PUT_POINTER", "begin_turn", "claim_grants", "end_turn", "fold"]
