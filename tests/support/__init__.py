"""Helpers for the tests and the repository's scripts that are not part of the installed package."""
