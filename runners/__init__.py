"""Back ends, one module each: where a job's harness runs (this machine, Modal, GitHub Actions)."""

if __name__ != "kernelcup.runners":  # the bare name would load a second copy of every module
    raise ImportError(f"import kernelcup.runners, not {__name__} (kernelcup/__init__.py says why)")
