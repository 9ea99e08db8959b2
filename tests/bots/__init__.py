"""Tests of the server, the HTTP and Slack front ends and the CLI, through real processes and HTTP."""
