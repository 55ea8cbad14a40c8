"""The run machinery: the engine, recovery, compaction, sub-workflows, worktrees, crashes
and faults."""
