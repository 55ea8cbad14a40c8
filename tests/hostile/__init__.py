"""Files from strangers: hostile progress files, journals and workflows, and fuzzing."""
