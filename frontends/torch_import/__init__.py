"""Import a torch.nn.Module into the aicc tensor dialect through torch.export."""

from frontends.torch_import.importer import (
    SUPPORTED_OPS,
    TorchImporter,
    export_module,
    import_torch,
    to_torch_inputs,
    upsample_taps,
)

__all__ = ["import_torch", "SUPPORTED_OPS", "to_torch_inputs", "TorchImporter", "export_module", "upsample_taps"]
