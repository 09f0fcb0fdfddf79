"""Tests of the relabel package, one file beside each module it mostly tests."""
