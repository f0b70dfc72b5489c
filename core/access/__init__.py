"""Who someone is and what they may do or see: users, roles, API tokens, sessions, limits."""
