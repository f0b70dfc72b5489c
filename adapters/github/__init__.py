"""GitHub as a chat: pull requests and their comments in, check runs and a comment out."""
