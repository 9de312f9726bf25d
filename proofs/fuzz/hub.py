"""``python -m proofs.fuzz.hub ARGS``: HypoFuzz's own ``hypothesis fuzz`` command, run as ``schedcheck fuzz``'s child."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """Run HypoFuzz's ``fuzz`` command with ``argv`` (its options, then ``--`` and pytest's)."""
    from hypofuzz.entrypoint import fuzz

    fuzz.main(args=list(sys.argv[1:] if argv is None else argv), prog_name="hypothesis fuzz")


if __name__ == "__main__":
    main()
