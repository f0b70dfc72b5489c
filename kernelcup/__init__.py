"""kernelcup: GPU-kernel leaderboards from Discord, Slack, the terminal and HTTP.

Everything kernelcup ships is imported under this one name: ``kernelcup.core``,
``kernelcup.adapters``, ``kernelcup.runners`` and ``kernelcup.harness``. Generic top-level names
(``adapters`` is also AdapterHub's package on PyPI) would share a folder of site-packages with
another distribution, and uninstalling one would delete the other's files.

The repository keeps the design's top-level folders (``core/``, ``adapters/``, ``runners/``,
``harness/``), and this package's subfolders are links to them (``kernelcup/core -> ../core``):
a link, not an import hook, so every tool sees one plain package tree.

- Python imports ``kernelcup.core.store.db`` from ``kernelcup/core/store/db.py``; its
  ``__file__`` keeps the link's path, so ``Path(__file__).absolute().parents[2]`` of a module in
  ``kernelcup/<part>/`` is the folder ``kernelcup`` is imported from, in a checkout and in
  site-packages alike (``.resolve()`` would leave the package in a checkout).
- setuptools walks links (``find_packages`` follows them) and copies their files into the
  wheel, which holds a plain ``kernelcup/`` folder and nothing else at the top.
- mypy checks the package once, by its ``kernelcup`` paths (``[tool.mypy] files``; the
  top-level folders are excluded); ruff does not follow links and lints each file once, by its
  top-level path.
- A module has one name only: each part's ``__init__.py`` refuses to be imported under its bare
  name (``import core`` from the repository root would otherwise load a second copy of every
  module), and tests/packaging/test_one_name.py checks that no module of ours ever is.
- The harness sandbox binds ``kernelcup/`` (only ``__init__.py`` and the links) and the real
  ``harness/`` folder of a checkout: the other links dangle inside, as they should.
"""
