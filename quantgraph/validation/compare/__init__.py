"""How the two models' outputs are judged: the one rule (judge.py), the reference and the
bound for what cannot be exact (like_reference.py, rounding_spread.py), which formats are
expected exact or not (integer_sums.py, qoperator.py, other_kernels.py, given_back.py), and how
the differences are distributed (error_stats.py)."""
