"""aicc-opt: xdsl-opt with aicc's dialects and passes registered.

    aicc-opt FILE.mlir -p "tensor-to-linalg,fuse-elementwise,bufferize"
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.xdsl_opt_main import xDSLOptMain

from compiler.universe import AICC_PASSES, AICC_UNIVERSE, target_passes


class AiccOptMain(xDSLOptMain):
    def register_all_dialects(self):
        super().register_all_dialects()
        # Without an installed entry point (running from a source tree) add ours by hand.
        for name, load in AICC_UNIVERSE.all_dialects.items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, load)

    def register_all_passes(self):
        super().register_all_passes()
        # targets registered since compiler.universe was imported (a plug-in, a test's toy
        # target) count too: their passes are looked up now, not at import
        for name, load in {**AICC_PASSES, **target_passes()}.items():
            self.available_passes.setdefault(name, load)

    def register_all_targets(self):
        super().register_all_targets()
        # each aicc target's output formats (-t llvm, -t cuda, ...); aicc's `llvm` replaces
        # xDSL's own, which goes through xDSL's llvm dialect
        from compiler.targets import available_targets, get_target

        for name in available_targets():
            try:
                printers = get_target(name).printers()
            except Exception:  # noqa: BLE001 - a broken third-party target must not break us
                continue
            self.available_targets.update(printers)


def main(args: Sequence[str] | None = None) -> int:
    from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

    from compiler.errors import CompileError

    try:
        AiccOptMain(description="aicc's modular optimizer driver", args=args).run()
    except FileNotFoundError as e:
        print(f"aicc-opt: error: no such file: {e.filename}", file=sys.stderr)
        return 1
    except (ParseError, VerifyException, DiagnosticException, CompileError, ValueError) as e:
        # ValueError: xDSL's report of an unknown pass or a malformed pipeline option.
        # The message already carries the location (file:line:col and the offending text).
        print(f"aicc-opt: error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
