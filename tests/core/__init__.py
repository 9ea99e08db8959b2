"""Tests of the core's rooms (protocol, agent, identity, the composition root)."""
