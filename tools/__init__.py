"""aicc's command lines: `aicc` and `aicc-opt` (thin: argument parsing, then the library)."""
