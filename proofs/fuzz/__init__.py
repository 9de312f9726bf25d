"""Campaigns on HypoFuzz: the properties it fuzzes (``properties``) and the command that runs it (proofs.cli.fuzz)."""
