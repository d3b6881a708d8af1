"""The CPU a benchmark ran on, printed next to its numbers (machines differ:
AVX2-only or AVX-512 with AVX512_BF16 change which kernels oneDNN runs)."""

ISA_PREFIXES = ("avx", "fma", "sse4", "amx", "f16c")


def cpu_info():
    """(model name, space-separated ISA flags) from /proc/cpuinfo: the vector
    extensions (avx*, fma, sse4*, amx*, f16c), sorted; ("?", "") when the
    file cannot be read."""
    model, flags = "?", []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and model == "?":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and not flags:
                    flags = line.split(":", 1)[1].split()
    except OSError:
        pass
    return model, " ".join(sorted(f for f in flags if f.startswith(ISA_PREFIXES)))
