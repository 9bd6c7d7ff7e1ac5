"""The inputs both models are fed: planned from what the graph says (plan.py, bounds.py,
masks.py, a decoder's signature and its two steps), searched for a plan the original runs
within a memory and a time budget (search.py, memory.py, non_finite.py), or read from files
(feeds.py); generated.py is the one planner every command uses."""
