"""Socket Mode with the same shape checks as HTTP mode (issue 27.3, bots/slack_shapes.py).

Over HTTP a body of a shape this server does not read is a 400 before Bolt sees it; over the
socket there is no status to answer, so the envelope is acked empty (Slack must not redeliver
junk), one warning line says why, and Bolt never reads it: no listener, no turn, no claim.
"""

from __future__ import annotations

import logging

from slack_bolt.adapter.socket_mode.aiohttp import AsyncSocketModeHandler
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from chat_approvals.bots.slack_shapes import socket_payload_problem

log = logging.getLogger("chat_approvals.slack")


class CheckedSocketModeHandler(AsyncSocketModeHandler):
    async def handle(self, socket_client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        problem = socket_payload_problem(req.type, req.payload)
        if problem is not None:
            log.warning("slack socket mode: refused a %s envelope: %s", req.type, problem)
            await socket_client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await super().handle(socket_client, req)
