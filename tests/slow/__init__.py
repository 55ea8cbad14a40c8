"""Soaks: long runs killed again and again (the long forms run with the slow switch)."""
