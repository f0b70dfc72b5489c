"""Deadlines on a clock: the scheduler, the deadline steps, the final standings and the
announcements around them."""
