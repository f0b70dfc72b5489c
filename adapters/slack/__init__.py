"""The Slack front end: the ``/leaderboard`` slash command, shared files and a submission form,
live progress by message edits, Block Kit replies and announcements (see README, "Slack")."""
