"""Coverage-guided fuzzing of every reader of bytes from outside the process.

``python tools/fuzz.py --short`` runs each target for a few seconds; ``--long`` runs the full
campaign. The targets live in ``targets_*.py`` and are listed by :mod:`fuzzing.registry`.
"""
