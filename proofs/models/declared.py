"""The part of the serving model's domain a target declares it supports (``DOMAIN``), and the model restricted to it.

A real engine accepts less than the serving model's domain: nano-vllm never chunks a
prefill, vLLM's ``SchedulerConfig`` requires ``max_num_batched_tokens >= max_num_seqs``.
A target (a ``serve`` function or an online factory) says so with one literal dict
at the top level of its file, ``DOMAIN = {...}``; schedcheck reads it from the
source with ``ast.literal_eval`` (no code of the target runs in the harness) and
then draws only calls inside it, minimises only to calls inside it, never runs a
call outside it (the other configs of the ``deterministic`` check, saved
counterexamples, the stateful test's configs and requests included), and states the
restriction in every verdict line.  A call outside a declared domain is never
charged to the target: ``replay`` refuses it in one line.

The vocabulary (every key optional; anything else is a usage error naming it):

- a bool field of the config (``chunked_prefill``; ``reserve_full_sequence`` and
  ``prefix_caching``, false when absent): the list of the values supported, e.g.
  ``"chunked_prefill": [False]``; the switches ``reserve_full_sequence`` (a policy
  switch) and ``prefix_caching`` are drawn only for a target that declares them
  (``[False, True]``: absent, false and true are drawn; ``[True]``: always true), in
  the calls and in the stateful test's configs, since a scheduler written before a
  switch rejects its key;
  prefix caching's prompt families (requests' ``tokens``, proofs.search.serving.caching_calls)
  are drawn for a target that lists ``prefix_caching`` true, and for our impl;
- an int field of the config (``max_seqs``, ``token_budget``, ``block_size``,
  ``num_blocks``): a dict of bounds, ``min``, ``max`` (each an int, or the name of
  another int field of the same config) and ``multiple_of`` (an int >= 1), e.g.
  ``"token_budget": {"min": "max_seqs"}``, ``"block_size": {"min": 2}``;
- ``prompt``, ``output``, ``prompt_plus_output``: bounds on every request, in the
  same form (``"prompt_plus_output": {"max": "token_budget"}``: each request's
  ``prompt + output`` at most the config's token budget);
- ``chunked`` and ``unchunked``: a dict of the keys above that applies only when the
  config's ``chunked_prefill`` is true (false).

What it assumes: the declaration is the engine's own rule, stated honestly (the
restriction is printed with every verdict, so a reader sees what was not checked).
Bounds: the serving model only; the chapter's model takes no declaration.
"""

from __future__ import annotations

import ast
import importlib.machinery
import os

from proofs.targets import Target, TargetError

NAME = "DOMAIN"
REQUEST_FIELDS = ("prompt", "output", "prompt_plus_output")
BOUNDS = ("min", "max", "multiple_of")
SECTIONS = {"chunked": True, "unchunked": False}
INT_FIELDS = ("max_seqs", "token_budget", "block_size", "num_blocks")
BOOL_FIELDS = ("chunked_prefill", "reserve_full_sequence", "prefix_caching")  # an absent one reads as False
# switches drawn only for a target that declares them (a scheduler written before one rejects its key): the policy
# switch reserve_full_sequence, and prefix_caching (issue 20), drawn absent, false and true for a target declaring both
SWITCHES = ("reserve_full_sequence", "prefix_caching")


# -- reading the declaration ------------------------------------------------------------------


def target_file(target: Target) -> str | None:
    """The source file of ``target``, found without importing anything of it (None if there is none)."""
    if target.path is not None:
        return target.path
    locations = None
    spec = None
    parts = target.module.split(".")
    for index in range(len(parts)):
        name = ".".join(parts[: index + 1])
        path = [target.root, *(locations or [])] if target.root and index == 0 else locations
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        locations = spec.submodule_search_locations
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return spec.origin


def read(target: Target) -> dict | None:
    """The ``DOMAIN`` literal of ``target``'s file, or None; TargetError if it is there but not a literal dict."""
    path = target_file(target)
    if path is None or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), filename=path)
    except (OSError, SyntaxError, ValueError):
        return None  # loading the target will say what is wrong with it
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == NAME for t in targets) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                raise TargetError(f"target {target.text!r}: {NAME} in {os.path.relpath(path)} must be a literal dict "
                                  "(read with ast.literal_eval; see proofs/models/declared.py)") from None
            if not isinstance(value, dict):
                raise TargetError(f"target {target.text!r}: {NAME}={value!r}: expected a dict")
            return value
    return None


# -- the declaration ---------------------------------------------------------------------------


def _is_int(value) -> bool:
    return type(value) is int


class Domain:
    """A parsed declaration: ``admits(call)``, ``fit(call)`` (a call moved inside it) and ``describe()``."""

    def __init__(self, raw: dict) -> None:
        self.raw = raw
        self.bool_keys = BOOL_FIELDS
        self.int_keys = INT_FIELDS
        self.rules = self._parse(raw, "DOMAIN", top=True)

    def _parse(self, raw, where: str, top: bool) -> dict:
        if not isinstance(raw, dict):
            raise ValueError(f"{where}={raw!r}: expected a dict")
        rules = {}
        for key, value in raw.items():
            name = f"{where}[{key!r}]"
            if key in SECTIONS:
                if not top:
                    raise ValueError(f"{name}: sections do not nest")
                rules[key] = self._parse(value, name, top=False)
            elif key in self.bool_keys:
                if not isinstance(value, (list, tuple)) or not value or any(type(v) is not bool for v in value):
                    raise ValueError(f"{name}={value!r}: expected a non-empty list of bools (the values supported)")
                rules[key] = tuple(value)
            elif key in self.int_keys or key in REQUEST_FIELDS:
                if not isinstance(value, dict) or not value:
                    raise ValueError(f"{name}={value!r}: expected a dict of bounds ({', '.join(BOUNDS)})")
                for bound, limit in value.items():
                    if bound not in BOUNDS:
                        raise ValueError(f"{name}: unknown bound {bound!r}; expected one of {', '.join(BOUNDS)}")
                    if bound == "multiple_of":
                        if not _is_int(limit) or limit < 1:
                            raise ValueError(f"{name}.multiple_of={limit!r}: expected an int >= 1")
                    elif not (_is_int(limit) or limit in self.int_keys) or (limit == key):
                        raise ValueError(f"{name}.{bound}={limit!r}: expected an int or the name of another int "
                                         f"field of the config ({', '.join(self.int_keys)})")
                rules[key] = dict(value)
            else:
                known = [*self.bool_keys, *self.int_keys, *REQUEST_FIELDS] + (list(SECTIONS) if top else [])
                raise ValueError(f"{name}: unknown key; a declaration names {', '.join(known)}")
        return rules

    # -- judging a call ------------------------------------------------------------------------

    def _sections(self, config: dict) -> list:
        rules = [self.rules]
        for section, chunked in SECTIONS.items():
            if section in self.rules and config.get("chunked_prefill") is chunked:
                rules.append(self.rules[section])
        return rules

    @staticmethod
    def _limit(limit, config: dict):
        return config[limit] if isinstance(limit, str) else limit

    @classmethod
    def _within(cls, value: int, bounds: dict, config: dict) -> bool:
        low, high = bounds.get("min"), bounds.get("max")
        if low is not None and value < cls._limit(low, config):
            return False
        if high is not None and value > cls._limit(high, config):
            return False
        step = bounds.get("multiple_of")
        return step is None or value % step == 0

    @staticmethod
    def _request_value(request: dict, field: str) -> int:
        if field == "prompt_plus_output":
            return request["prompt"] + request["output"]
        return request[field]

    def admits(self, call) -> bool:
        """True when the (model-valid) ``call`` lies inside the declared domain."""
        requests, config = call
        for rules in self._sections(config):
            for key, rule in rules.items():
                if key in SECTIONS:
                    continue
                if key in self.bool_keys:
                    if config.get(key, False) not in rule:
                        return False
                elif key in REQUEST_FIELDS:
                    if any(not self._within(self._request_value(r, key), rule, config) for r in requests):
                        return False
                elif not self._within(config[key], rule, config):
                    return False
        return True

    # -- moving a call inside it ------------------------------------------------------------------

    def switch_choices(self) -> list:
        """[(key, values)] for each switch the declaration names: the values to draw (None: the key left out)."""
        return [(key, ((None,) if False in self.rules[key] else ()) + tuple(self.rules[key]))
                for key in SWITCHES if key in self.rules]

    def fit_config(self, config: dict) -> dict:
        """``config`` moved inside the declaration: unsupported bools replaced, ints raised or lowered to their bounds."""
        fitted = dict(config)
        for key, rule in self.rules.items():
            if key in self.bool_keys and fitted.get(key, False) not in rule:
                fitted[key] = rule[0]
        for _ in range(3):  # bounds may name each other: a few rounds settle them
            for rules in self._sections(fitted):
                for key, rule in rules.items():
                    if key in self.int_keys and key in fitted:
                        fitted[key] = self._fit_int(fitted[key], rule, fitted)
        return type(config)(fitted) if isinstance(config, dict) and type(config) is not dict else fitted

    @classmethod
    def _fit_int(cls, value: int, rule: dict, config: dict) -> int:
        low = cls._limit(rule["min"], config) if "min" in rule else None
        high = cls._limit(rule["max"], config) if "max" in rule else None
        step = rule.get("multiple_of", 1)
        if low is not None and value < low:
            value = low
        if high is not None and value > high:
            value = high
        if value % step:
            up = value + step - value % step
            value = up if high is None or up <= high else value - value % step
        return max(value, 1)

    def request_limit(self, config: dict, model_limit: int) -> int:
        """The most tokens ``prompt + output - 1`` a request may have: the model's ``model_limit``, within the declaration."""
        limit = model_limit
        for rules in self._sections(config):
            for key, rule in rules.items():
                if key == "prompt_plus_output" and "max" in rule:
                    limit = min(limit, self._limit(rule["max"], config) - 1)
        return limit

    def fit_request(self, request: dict, config: dict, model_limit: int) -> dict | None:
        """``request`` with its output, then its prompt, cut until it lies inside the declaration and the
        model's ``model_limit`` (peak tokens); None when even one token of each does not."""
        fitted = dict(request)
        limit = self.request_limit(config, model_limit)
        while fitted["prompt"] + fitted["output"] - 1 > limit or not self._request_ok(fitted, config):
            if fitted["output"] > 1:
                fitted["output"] -= 1
            elif fitted["prompt"] > 1:
                fitted["prompt"] -= 1
            else:
                return None
        if "tokens" in fitted and fitted["tokens"] is not None:
            fitted["tokens"] = type(fitted["tokens"])(list(fitted["tokens"])[: fitted["prompt"]])
        return type(request)(fitted) if type(request) is not dict else fitted

    def _request_ok(self, request: dict, config: dict) -> bool:
        return all(self._within(self._request_value(request, key), rule, config)
                   for rules in self._sections(config) for key, rule in rules.items() if key in REQUEST_FIELDS)

    # -- saying it -------------------------------------------------------------------------------

    def describe(self) -> str:
        """The restriction in words, for every verdict line: ``declared domain: token_budget >= max_seqs; ...``."""
        parts = self._words(self.rules)
        for section, chunked in SECTIONS.items():
            if section in self.rules:
                inner = self._words(self.rules[section])
                parts.append(f"{'with' if chunked else 'without'} chunked prefill, " + ", ".join(inner))
        return "declared domain: " + ("; ".join(parts) if parts else "the whole domain")

    def _words(self, rules: dict) -> list:
        words = []
        for key, rule in rules.items():
            if key in SECTIONS:
                continue
            if key in self.bool_keys:
                words.append(f"{key}=" + " or ".join(str(v) for v in rule))
                continue
            name = "prompt + output" if key == "prompt_plus_output" else key
            if key in REQUEST_FIELDS:
                name = f"every request's {name}"
            if "min" in rule:
                words.append(f"{name} >= {rule['min']}")
            if "max" in rule:
                words.append(f"{name} <= {rule['max']}")
            if "multiple_of" in rule:
                words.append(f"{name} a multiple of {rule['multiple_of']}")
        return words


# -- the model restricted to it ------------------------------------------------------------------


class DeclaredModel:
    """``base`` (the serving model, online or not) with every call it draws, minimises or replays inside ``domain``."""

    def __init__(self, base, domain: Domain) -> None:
        self.base = base
        self.declared = domain

    def __getattr__(self, name):
        return getattr(self.base, name)

    def _peak(self, config: dict) -> int:
        from proofs.search.serving import peak_tokens

        return peak_tokens(config)

    def is_valid(self, *call) -> bool:
        return self.base.is_valid(*call) and self.declared.admits(call)

    def fit(self, call):
        """A drawn call moved inside the declaration: its config fitted, then each request cut (or dropped) to fit."""
        requests, config = call
        config = self.declared.fit_config(config)
        limit = self._peak(config)
        fitted = [r for r in (self.declared.fit_request(r, config, limit) for r in requests) if r is not None]
        return (type(requests)(fitted) if isinstance(requests, (list, tuple)) and type(requests) not in (list, tuple)
                else tuple(fitted) if isinstance(requests, tuple) else fitted), config

    def valid_calls(self, max_jobs: int | None = None):
        calls = self.base.valid_calls(max_jobs)  # prompt families when the declaration lists prefix_caching true
        switches = self.declared.switch_choices()
        if switches:  # a switch the target declares is drawn among its values (absent reads as False)
            from hypothesis import strategies as st

            choices = [st.sampled_from(values) for _, values in switches]
            calls = st.tuples(calls, *choices).map(lambda drawn: self._switched(drawn[0], zip(switches, drawn[1:])))
        return calls.map(self.fit).filter(lambda call: self.is_valid(*call))

    @staticmethod
    def _switched(call, chosen):
        requests, config = call
        config = dict(config)
        for (key, _), value in chosen:
            if value is not None:
                config[key] = value
        return requests, config

    def calls_between(self, call) -> list:
        """The base's other calls, those valid for the model but outside the declaration left out."""
        return [c for c in self.base.calls_between(call) if not self.base.is_valid(*c) or self.declared.admits(c)]

    def minimize_valid(self, call, fails, seconds: float, coarse: bool = False):
        inside = self.declared.admits
        return self.base.minimize_valid(call, lambda c: inside(c) and fails(c), seconds, coarse=coarse)

    def one_step_larger(self, call):
        larger = self.base.one_step_larger(call)
        return larger if self.is_valid(*larger) else call

    def describe(self) -> str:
        return self.declared.describe()


OURS = ("impl:serve", "impl:make_serving")  # our impl: it implements the whole serving model, prefix caching included


def draws_caching(model, raw: dict | None, target: Target) -> bool:
    """Whether the search draws prefix caching (``prefix_caching`` and requests' ``tokens``) for ``target``: for
    our impl, and for a target whose ``DOMAIN`` lists ``prefix_caching`` true.  Like the policy switch, never for
    one that does not say so: a scheduler written before issue 20 rejects both keys."""
    if model.name != "serving" or not hasattr(model, "draws_caching"):
        return False
    if raw is None:
        return target.text in OURS
    values = raw.get("prefix_caching")
    return isinstance(values, (list, tuple)) and True in values


def _drawing_caching(model):
    """A copy of ``model`` (down to the serving model an online wrapper holds) whose strategies draw prefix caching."""
    copied = object.__new__(type(model))  # not copy.copy: a wrapper's __getattr__ would recurse while it copies
    copied.__dict__.update(vars(model))
    model = copied
    if "base" in vars(model):
        model.base = _drawing_caching(model.base)
    else:
        model.draws_caching = True
    return model


def for_target(model, target: Target):
    """``model`` restricted to the domain ``target`` declares (``DOMAIN`` in its file), or ``model`` itself;
    drawing prefix caching too where the target supports it (``draws_caching``).

    TargetError (a usage error, exit 2) when the declaration is malformed or the model takes none."""
    raw = read(target)
    if draws_caching(model, raw, target):
        model = _drawing_caching(model)
    if raw is None:
        return model
    if model.name != "serving":
        raise TargetError(f"target {target.text!r}: a {NAME} declaration is read for the serving model only "
                          f"(--model serving), not the {model.name} model")
    try:
        domain = Domain(raw)
    except ValueError as error:
        raise TargetError(f"target {target.text!r}: {error}") from None
    return DeclaredModel(model, domain)
