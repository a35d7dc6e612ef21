"""What many test files need alike: ports, waiting, the CLI in process, settings, moments."""
