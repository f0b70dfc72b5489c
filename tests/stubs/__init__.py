"""Stand-ins for third-party packages, importable under the package's own name (put this folder on
``sys.path``); see each package's docstring for what it implements and what it leaves out."""
