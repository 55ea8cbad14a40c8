"""Sharing runs: share, fork, rewind, log, clean, and progress files in pull requests."""
