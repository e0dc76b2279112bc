"""The one llama-cpp-python build the committed recordings were made with, in one place.

A greedy reply is bit-for-bit the same only on the same llama.cpp code compiled for the same CPU
features: another release, or kernels built for the machine (AVX-512, AMX) instead of these, may
answer the same prompt some tokens differently. So the release is pinned exactly and compiled
portably, for x86-64-v3 (AVX2, FMA, F16C: any x86 machine of the last decade; Arm ignores the
switches). The Makefile reads VERSION and CMAKE_ARGS from this file (with sed: it runs before any
environment exists), pyproject's `embedded` extra and requirements/lock.txt name the same version
(tests/test_llama_pin.py checks all three), and the embedded backend compares each live reply's
build with BUILD (pipeline.llm.asking says once per run when they differ; the cache key does not
hold the build, so a replay needs none).

Run as a script (`python -I pipeline/llm/llama_pin.py --check-cpu`, what `make install`
does first), it says whether this machine can run the build; it imports nothing but the standard
library.
"""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

VERSION = "0.3.36"
CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# What llama.cpp says this build's kernels use (pipeline.llm.backends.embedded.llama_build), as
# recorded with every reply of the committed demos.
BUILD = "SSE3 SSSE3 AVX AVX2 F16C FMA BMI2 LLAMAFILE OPENMP REPACK"
# /proc/cpuinfo's names of the instruction sets the build needs on x86.
REQUIRED_CPU_FLAGS = ("avx2", "fma", "f16c")
X86 = {"x86_64", "amd64", "i386", "i686", "x86"}


def missing_cpu_flags(cpuinfo: str | None = None, machine: str | None = None) -> tuple[str, ...]:
    """The instruction sets the build needs that this x86 CPU lacks (none on Arm, which ignores
    the switches, or where /proc/cpuinfo cannot say: macOS, Windows)."""
    if (machine or platform.machine()).lower() not in X86:
        return ()
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return ()
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            flags = set(value.split())
            break
    else:
        return ()
    return tuple(flag for flag in REQUIRED_CPU_FLAGS if flag not in flags)


def cpu_message(missing: tuple[str, ...]) -> str:
    return (
        f"this CPU lacks {', '.join(f.upper() for f in missing)}, which the pinned llama-cpp-python "
        f"build ({VERSION}, {CMAKE_ARGS}) needs: the embedded model would stop at its first "
        "instruction with 'Illegal instruction'. Fix: replay the recordings (`make replay`, no model "
        "needed), or run the model elsewhere (llm.backend: ollama or openai in params.yaml)."
    )


def foreign_build(meta: Mapping[str, Any]) -> str | None:
    """How a live embedded reply's build differs from the pinned one, or None when it does not
    (or the reply is not the embedded model's)."""
    version, build = meta.get("llama_cpp_version"), meta.get("llama_cpp_build")
    if version is None and build is None:
        return None
    differs = []
    if version != VERSION:
        differs.append(f"llama-cpp-python {version} (pinned: {VERSION})")
    if build != BUILD:
        differs.append(f"kernels '{build}' (pinned: '{BUILD}')")
    return "; ".join(differs) or None


def main(argv: list[str]) -> int:
    if argv[1:] == ["--check-cpu"]:
        missing = missing_cpu_flags()
        if missing:
            print(f"warning: {cpu_message(missing)}", file=sys.stderr)
        return 0
    print(f"VERSION={VERSION}\nCMAKE_ARGS={CMAKE_ARGS}\nBUILD={BUILD}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
