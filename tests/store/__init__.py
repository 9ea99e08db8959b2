"""Tests of the store backends, their conformance suite and faults."""
