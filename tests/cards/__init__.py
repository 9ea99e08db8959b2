"""Tests of the pure card renderers and parsers."""
