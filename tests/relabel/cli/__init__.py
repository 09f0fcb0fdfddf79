"""Tests of the command line: each command end to end, its help and its one-line errors."""
