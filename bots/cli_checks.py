"""R20 for the command line: every argument is valid text before a command opens the store.

Arguments that are not UTF-8 reach Python as lone surrogates (surrogateescape); a person's id,
a chat and a deny reason must also hold no control character or bidi override.
"""

from __future__ import annotations

import argparse

from chat_approvals.bots.turn_limits import turn_text_problem
from chat_approvals.core.text import display_problem, is_scalar_text

SHOWN = ("user", "chat")  # read by a person, on a card or in the audit trail (a reason: read_answer)


def argument_problem(args: argparse.Namespace) -> str | None:
    """Why these parsed arguments may not be used, or None."""
    for name, value in sorted(vars(args).items()):
        values = value if isinstance(value, list) else [value]
        for item in values:
            if not isinstance(item, str):
                continue
            flag = f"--{name.replace('_', '-')}"
            if not is_scalar_text(item):
                return f"{flag} is not valid text (bytes that are not UTF-8?)"
            problem = display_problem(item, flag) if name in SHOWN else None
            if problem is not None:
                return problem
            if name in ("user", "chat") and item != item.strip():
                return f"{flag} has white space around it"
            if name == "text" and (too_much := turn_text_problem(item)) is not None:
                return too_much
    return None
