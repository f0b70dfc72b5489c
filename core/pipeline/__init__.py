"""A submission's way through kernelcup: accepted (``submissions``, ``fairness``), its jobs run
on a runner (``jobs``, ``jobrows``, ``jobspec``, ``runner``, ``timeouts``), followed live
(``events``), reported and delivered once (``report``, ``delivery``)."""
