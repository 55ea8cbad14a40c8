"""``flow batch``: rows on local processes and on Ray."""
