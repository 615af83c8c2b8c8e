"""Code generators, one package per output language, shared by the targets that emit it:
``llvm`` (loop IR -> LLVM IR through llvmlite: the cpu target, and any other LLVM target)
and ``cuda`` (GPU-mapped loop IR -> CUDA C: the cuda and cuda-emu targets). They read the IR
and know nothing of how a target compiles, loads or runs what they print."""
