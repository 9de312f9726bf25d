"""The README states the result contract of schedule(), and its worked example is what the spec returns."""

import ast
import json
import pathlib
import re

import spec
from spec.observation import COMPLETED_KEYS, RESULT_KEYS

README = (pathlib.Path(__file__).parent.parent / "README.md").read_text()


def contract_section() -> str:
    match = re.search(r"^## The contract of `schedule\(jobs, slots, continuous\) -> result`$(.*?)^## ", README, re.M | re.S)
    assert match, "README has no section on the result contract"
    return match.group(1)


def test_the_readme_names_every_key_and_the_orders():
    section = contract_section()
    for key in RESULT_KEYS + COMPLETED_KEYS:
        assert f"`{key}`" in section, key
    for rule in ("ordered by `id`", "`(arrival, id)` order", "idle ticks do not appear", "extra keys are allowed",
                 "`start` (the first tick that served it"):
        assert rule in section, rule


def test_the_worked_example_is_what_the_spec_returns_and_conforms():
    section = contract_section()
    call = re.search(r"For example, `schedule\((.*?)\)` returns", section, re.S).group(1)
    jobs, slots, continuous = ast.literal_eval(f"({call})")
    result = json.loads(re.search(r"```json\n(.*?)```", section, re.S).group(1))
    assert result == spec.run(jobs, slots, continuous)
    assert spec.check(jobs, slots, continuous, result) == []
    assert spec.check(jobs, slots, continuous, dict(result, extra={"any": "thing"})) == []  # extra keys allowed
