"""What capping a fleet costs: a fleet's measured power replayed under a power limit, each
job capped by a policy and slowed as its cap curve says (``powerkit cap``)."""
