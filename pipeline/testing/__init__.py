"""Test doubles that live in the package, so tests and benchmarks share them."""
