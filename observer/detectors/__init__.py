"""Pure detectors (view in, symptoms out, one per file) and the condition tracker that turns
persistent symptoms into findings that open and close."""
