"""What runs on the GPU machine: standard library and torch only (harness/NOTES.md)."""

if __name__ != "kernelcup.harness":  # the bare name would load a second copy of every module
    raise ImportError(f"import kernelcup.harness, not {__name__} (kernelcup/__init__.py says why)")
