"""The cell layer every analysis stands on: a trace scanned into cells on a grid (sql.py,
grid.py), gaps filled by a policy (fill.py), rolling means over cells (rolling.py) and the
step-wise energy and gap arithmetic (steps.py). It imports the trace and the foundation
modules only; :mod:`powerkit.engine` runs it locally or on Ray, and the analyses sit above."""
