"""Fusion "auto": each unit to the faster engine by a rule table or by candidate plans timed on
the CPU at hand, the decisions cached on disk."""
