"""Front ends, one folder each: a platform's events in, the core's replies rendered natively."""

if __name__ != "kernelcup.adapters":  # the bare name would load a second copy (and clash on PyPI)
    raise ImportError(f"import kernelcup.adapters, not {__name__} (kernelcup/__init__.py says why)")
