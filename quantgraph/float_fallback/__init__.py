"""The smallest float fallback that reaches a quality target (issue #43): the search over
candidates (:mod:`.search`), above validation, which it runs many times."""
