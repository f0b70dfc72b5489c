"""The Discord adapter: every core command as a slash command, live progress, threads, files."""
