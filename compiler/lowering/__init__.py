"""aicc's lowering passes, one file per pass; each is a registered xDSL ModulePass."""
