"""Similar-run detection: keywords, scores, the index and the resume prompt."""
