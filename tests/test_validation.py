"""Every class of bad input raises ValueError naming the field, the value and the rule."""

import math
import re

import pytest

import impl
import spec

VALID_JOB = {"id": 1, "arrival": 0, "tokens": 2}


class IntSubclass(int):
    pass


BAD_VALUES = {
    "bool": True,
    "float": 2.0,
    "fraction": 1.5,
    "nan": math.nan,
    "inf": math.inf,
    "str": "3",
    "None": None,
    "int subclass": IntSubclass(3),
}

VALIDATORS = {"spec.validate": spec.validate, "impl.schedule": impl.schedule}


@pytest.fixture(params=sorted(VALIDATORS))
def validator(request):
    return VALIDATORS[request.param]


def with_field(field, value):
    job = dict(VALID_JOB)
    job[field] = value
    return job


@pytest.mark.parametrize("field", ["id", "arrival", "tokens"])
@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_wrongly_typed_field_is_named(validator, field, kind):
    value = BAD_VALUES[kind]
    with pytest.raises(ValueError, match=re.escape(f"jobs[1].{field}={value!r}: expected an int")):
        validator([dict(VALID_JOB, id=0), with_field(field, value)], 1, True)


@pytest.mark.parametrize(
    "field, value, rule",
    [("arrival", -1, ">= 0"), ("tokens", 0, ">= 1"), ("tokens", -3, ">= 1"), ("arrival", -(2**70), ">= 0")],
)
def test_out_of_range_field(validator, field, value, rule):
    with pytest.raises(ValueError, match=re.escape(f"jobs[0].{field}={value!r}: expected an int {rule}")):
        validator([with_field(field, value)], 1, False)


@pytest.mark.parametrize("slots", [0, -1, True, 1.0, 2.5, "2", None, math.inf, IntSubclass(2)])
def test_bad_slots(validator, slots):
    with pytest.raises(ValueError, match=re.escape(f"slots={slots!r}: expected an int >= 1")):
        validator([VALID_JOB], slots, True)


@pytest.mark.parametrize("continuous", [1, 0, None, "True", 1.0])
def test_bad_continuous(validator, continuous):
    with pytest.raises(ValueError, match=re.escape(f"continuous={continuous!r}: expected a bool")):
        validator([VALID_JOB], 1, continuous)


@pytest.mark.parametrize("jobs", [None, {"id": 1}, "jobs", 3, iter([VALID_JOB]), {1, 2}])
def test_jobs_not_a_list_or_tuple(validator, jobs):
    with pytest.raises(ValueError, match="expected a list or tuple of job dicts"):
        validator(jobs, 1, True)


@pytest.mark.parametrize("job", [None, 3, [1, 0, 2], (1, 0, 2), "job"])
def test_job_not_a_dict(validator, job):
    with pytest.raises(ValueError, match=re.escape(f"jobs[0]={job!r}: expected a dict")):
        validator([job], 1, True)


@pytest.mark.parametrize("missing", ["id", "arrival", "tokens"])
def test_missing_key(validator, missing):
    job = {key: value for key, value in VALID_JOB.items() if key != missing}
    with pytest.raises(ValueError, match=re.escape(f"jobs[0]: missing key {missing!r}")):
        validator([job], 1, True)


@pytest.mark.parametrize("extra", ["priority", 1, None])
def test_extra_key(validator, extra):
    with pytest.raises(ValueError, match=re.escape(f"jobs[0]: unexpected key {extra!r}")):
        validator([dict(VALID_JOB, **{}) | {extra: 0}], 1, True)


def test_repeated_id(validator):
    jobs = [VALID_JOB, {"id": 2, "arrival": 0, "tokens": 1}, dict(VALID_JOB, arrival=5)]
    with pytest.raises(ValueError, match=re.escape("jobs[2].id=1: ids must be unique (also jobs[0].id)")):
        validator(jobs, 1, True)


def test_subclasses_of_list_tuple_and_dict_are_accepted():
    class Jobs(list):
        pass

    class JobDict(dict):
        pass

    jobs = Jobs([JobDict(VALID_JOB)])
    assert impl.schedule(jobs, 1, True) == spec.run(tuple(jobs), 1, True)
    assert spec.is_valid(jobs, 1, True)


def test_huge_ints_are_valid():
    jobs = [{"id": -(2**90), "arrival": 2**80, "tokens": 1}]
    assert impl.schedule(jobs, 2**70, False) == spec.run(jobs, 2**70, False)


def test_rejected_before_any_work():
    """A bad job after a huge one is rejected at once: validation precedes scheduling."""
    jobs = [{"id": 0, "arrival": 0, "tokens": 10**12}, {"id": 1, "arrival": 0, "tokens": 0}]
    with pytest.raises(ValueError, match=re.escape("jobs[1].tokens=0")):
        impl.schedule(jobs, 1, True)


def test_callers_objects_are_not_modified_and_no_state_survives_a_rejection(example1):
    snapshot = [dict(job) for job in example1]
    first = impl.schedule(example1, 2, True)
    with pytest.raises(ValueError):
        impl.schedule(example1 + [{"id": 0, "arrival": 0, "tokens": 1}], 2, True)
    assert example1 == snapshot
    assert impl.schedule(example1, 2, True) == first
    first["completed"][0]["finish"] = 99  # the caller owns the result, too
    assert impl.schedule(example1, 2, True)["completed"][0]["finish"] == 1
