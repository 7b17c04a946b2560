"""ATen's CPU kernels of the functions that MKL's vector math library (VML) computes with approximate
instructions, replaced by numpy's, for ``numerics=strict``.

ATen hands ``sqrt``, ``log``, ``log2``, ``log10``, ``tan``, ``atan``, ``asin`` and ``acos`` of float and
double tensors to VML (and ``pow(x, 0.5)`` to its ``sqrt``). Even in the branch ``MKL_CBWR=COMPATIBLE``
selects on every x86-64 CPU, VML's kernels of exactly these functions start from ``rsqrtps`` or
``rcpps``, whose bits the instruction set leaves to the implementation: Intel and AMD differ, and so do the
last bits of a float32 ``sqrt``, and with them Adam's and RMSprop's steps and every Euclidean distance of
``torch.cdist``. numpy computes ``sqrt`` with the IEEE instruction (correctly rounded on every CPU) and
the others with the C library, with its CPU-dependent loops disabled by ``NPY_DISABLE_CPU_FEATURES``
(:mod:`noisydml.numerics`).

The kernels are registered at the dispatcher's CPU key, so every caller reaches them, C++ ones included
(``cdist``, the optimizers, autograd's formulas); autograd, above that key, is unchanged.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch

UFUNCS: dict[str, np.ufunc] = {
    "sqrt": np.sqrt,
    "log": np.log,
    "log2": np.log2,
    "log10": np.log10,
    "tan": np.tan,
    "atan": np.arctan,
    "asin": np.arcsin,
    "acos": np.arccos,
}
# Held for the life of the process: the registrations last as long as the library object.
_LIBRARY: list[torch.library.Library] = []


def installed() -> bool:
    """Whether this process's ATen computes :data:`UFUNCS` with numpy's kernels."""
    return bool(_LIBRARY)


def install() -> None:
    """Register numpy's kernels for :data:`UFUNCS` and ``pow(x, 0.5)`` at ATen's CPU key (once)."""
    if _LIBRARY:
        return
    library = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():
        # torch warns that a kernel of aten's is overridden, which is the point.
        warnings.simplefilter("ignore", UserWarning)
        for name, ufunc in UFUNCS.items():
            library.impl(name, _functional(ufunc), "CPU")
            library.impl(f"{name}_", _inplace(ufunc), "CPU")
            library.impl(f"{name}.out", _out(ufunc), "CPU")
        library.impl("pow.Tensor_Scalar", _pow, "CPU")
        library.impl("pow_.Scalar", _pow_, "CPU")
    _LIBRARY.append(library)


def _result_dtype(x: torch.Tensor) -> torch.dtype:
    # ATen's unary float functions compute an integer or bool tensor in the default float type.
    return x.dtype if x.is_floating_point() or x.is_complex() else torch.get_default_dtype()


def _functional(ufunc: np.ufunc) -> Callable[[torch.Tensor], torch.Tensor]:
    def kernel(x: torch.Tensor) -> torch.Tensor:
        dtype = _result_dtype(x)
        if dtype == torch.bfloat16:
            # numpy has no bfloat16; ATen's own kernel computes it in float32 too.
            return kernel(x.float()).to(dtype)
        source = x.detach().resolve_conj().resolve_neg().to(dtype)
        result = torch.empty_like(source)
        ufunc(source.numpy(), out=result.numpy())
        return result

    return kernel


def _inplace(ufunc: np.ufunc) -> Callable[[torch.Tensor], torch.Tensor]:
    functional = _functional(ufunc)

    def kernel(x: torch.Tensor) -> torch.Tensor:
        if _result_dtype(x) != x.dtype:
            raise RuntimeError(f"result type {_result_dtype(x)} can't be cast to the output type {x.dtype}")
        x.copy_(functional(x))
        return x

    return kernel


def _out(ufunc: np.ufunc) -> Callable[..., torch.Tensor]:
    functional = _functional(ufunc)

    def kernel(x: torch.Tensor, *, out: torch.Tensor) -> torch.Tensor:
        result = functional(x)
        if out.shape != result.shape:
            out.resize_(result.shape)
        out.copy_(result)
        return out

    return kernel


_sqrt = _functional(np.sqrt)


def _pow(x: torch.Tensor, exponent: float) -> torch.Tensor:
    if exponent == 0.5 and not x.is_complex():
        return _sqrt(x)
    # Any other exponent: ATen's own kernel, through the out= overload left in place.
    out = torch.empty_like(x, dtype=torch.result_type(x, exponent))
    return torch.pow(x, exponent, out=out)


def _pow_(x: torch.Tensor, exponent: float) -> torch.Tensor:
    if exponent == 0.5 and x.is_floating_point():
        x.copy_(_sqrt(x))
        return x
    return torch.pow(x, exponent, out=x)
