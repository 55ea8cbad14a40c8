"""The progress file format: render, parse, round trip, the store and its journal, crash-safe
writes."""
