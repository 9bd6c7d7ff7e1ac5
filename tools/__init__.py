"""Evidence and generators that live beside the product, not in it.

Run from the repository root: ``python -m tools.<name>``. Each writes or checks a committed file
(docs/, the C++ header) or prints figures; tests import them to check the files are current.
"""
