"""`python -m chat_approvals`: the same CLI as the `chat-approvals` command."""

from chat_approvals.bots.cli import main

raise SystemExit(main())
