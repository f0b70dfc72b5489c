"""The harness's own code in the submission's process, as it was before the submission was loaded.

The child makes each call's inputs, samples them and ships the output with its own functions,
the leaderboard's ``reference.py`` and torch, all in the process the submission shares. A
submission that replaces one of those functions can do its work while the inputs are made,
outside the timed call: ``Problem.generate`` wrapped to compute each answer into a tensor of its
own, then returned by a call that does nothing
(``tests/harness/fixtures/submissions/precompute_in_generate.py.txt``; JOURNAL.md, The watch on
the child's own code). So before the submission
is imported the child notes every function and class of the harness's and the leaderboard's
modules and of its own objects (and each Python function's code), the Python methods of ``torch.Tensor`` and
``torch.nn.functional``, and torch's C operators (``torch.randn``, ``torch.empty``, ...). Before
and after it makes each call's inputs, and before it ships an output, it checks them, and that
no torch function or dispatch mode and no trace or profile function is installed. A change
fails the run.

torch's Python-level functions are not watched: importing ``torch._dynamo`` replaces
``torch.manual_seed``, so honest ``torch.compile`` code would change them. Code that writes
the interpreter's memory (ctypes) is beyond any check made in the process it can write
(``harness/NOTES.md``, Known gaps).
"""

from __future__ import annotations

import operator
import sys
import types
from pathlib import Path
from typing import Any


def _watched(value: Any) -> bool:
    """Code, and the harness's own objects (the timer's record): never plain data, which the
    harness itself changes (the timer's flush buffer, made on first use)."""
    own = type(value).__module__.startswith("kernelcup.harness")
    return own or callable(value) or isinstance(value, type | types.ModuleType)


_code_of = operator.attrgetter("__code__")


class Watch:
    """Identities of what the harness relies on, noted once, checked as often as needed (each
    check compares tuples of ids built by ``map``, cheap enough for every order)."""

    def __init__(self) -> None:
        self._entries: list[tuple[str, Any, tuple[str, ...], tuple[int, ...]]] = []
        self._code_names: list[str] = []
        self._functions: list[types.FunctionType] = []
        self._codes: tuple[int, ...] = ()
        # A trace or profile function the operator started the process under
        # (``KERNELCUP_HARNESS_PROFILE=1``) was there before the submission: any other is not.
        self._trace = sys.gettrace()
        self._profile = sys.getprofile()

    @classmethod
    def before_submission(cls, leaderboard_dir: Path, objects: dict[str, Any] | None = None) -> Watch:
        """Note the harness's modules, the leaderboard's (those imported from ``leaderboard_dir``),
        torch's operators and the attributes of the harness's own ``objects`` (the problem, the
        timer), as they are now."""
        import torch
        import torch.nn.functional

        watch = cls()
        for name, thing in (objects or {}).items():
            watch._namespace(name, dict(vars(thing)), vars(thing))
        folder = leaderboard_dir.resolve()
        for name, module in list(sys.modules.items()):
            origin = getattr(module, "__file__", None)
            ours = isinstance(origin, str) and Path(origin).resolve().is_relative_to(folder)
            if name.startswith("kernelcup.harness") or ours:
                watch._module(name, module)
        watch._namespace("torch.Tensor", dict(vars(torch.Tensor)), vars(torch.Tensor), code=False)
        watch._namespace("torch.nn.functional", vars(torch.nn.functional), vars(torch.nn.functional), code=False)
        operators = {k: v for k, v in vars(torch).items() if isinstance(v, types.BuiltinFunctionType)}
        watch._namespace("torch", operators, vars(torch), code=False)
        watch._codes = tuple(map(id, map(_code_of, watch._functions)))
        return watch

    def _module(self, name: str, module: types.ModuleType) -> None:
        namespace = vars(module)
        self._namespace(name, namespace, namespace)
        for key, value in list(namespace.items()):
            if isinstance(value, type) and getattr(value, "__module__", None) == name:
                self._namespace(f"{name}.{key}", dict(vars(value)), vars(value))

    def _namespace(self, where: str, noted: dict[str, Any], live: Any, code: bool = True) -> None:
        keys = tuple(key for key, value in noted.items() if _watched(value))
        self._entries.append((where, live, keys, tuple(id(noted[key]) for key in keys)))
        if code:
            for key, value in noted.items():
                function = getattr(value, "__func__", value)  # a classmethod's or staticmethod's function
                if isinstance(function, types.FunctionType):
                    self._code_names.append(f"{where}.{key}")
                    self._functions.append(function)

    def changed(self) -> str:
        """What the submission changed, in a few words; empty where nothing was."""
        for where, live, keys, ids in self._entries:
            if tuple(map(id, map(live.get, keys))) != ids:
                for key, noted in zip(keys, ids, strict=True):
                    if id(live.get(key)) != noted:
                        return f"{where}.{key} was replaced"
        if tuple(map(id, map(_code_of, self._functions))) != self._codes:
            for name, function, noted in zip(self._code_names, self._functions, self._codes, strict=True):
                if id(function.__code__) != noted:
                    return f"the code of {name} was replaced"
        return _hooks(self._trace, self._profile)


def _hooks(trace: Any, profile: Any) -> str:
    import torch

    functions = getattr(torch._C, "_len_torch_function_stack", lambda: 0)()
    dispatch = getattr(torch._C, "_len_torch_dispatch_stack", lambda: 0)()
    if functions:
        return "a torch function mode was left installed"
    if dispatch:
        return "a torch dispatch mode was left installed"
    if sys.gettrace() is not trace or sys.getprofile() is not profile:
        return "a trace or profile function was installed"
    return ""
