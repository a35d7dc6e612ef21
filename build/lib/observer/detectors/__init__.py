"""Pure detectors (view in, symptoms out, one per file), scheduler words two of them share, and
the condition tracker that turns persistent symptoms into findings that open and close."""
