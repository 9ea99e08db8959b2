"""Tests of the sandbox and its egress gate, attacks included."""
