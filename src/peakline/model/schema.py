"""How a profile record is declared: once, as its JSON fields, from which everything follows.

A record class lists its fields in ``_FIELDS`` (in the order the file writes them), each a
``_Field``: the JSON name, its checker (peakline.model.checks), whether the file must hold it,
the model's default, how it is written, and how merged profiles combine it. ``@record`` makes
the class a record with exactly those fields (plus ``extra``): an ``__init__``, ``__eq__`` and
``__repr__`` as a dataclass would have, so that

* reading (``_from_json``: validation) and writing (``to_dict``) walk the same table;
* merging (peakline.model.merge) adds up the fields declared ``merge=SUM`` (``summed``);
* the builder carries core counters into fields of the same name (peakline.model.builder);
* docs/profile-format.md is tested against the tables (tests/python/test_format_spec.py).

Forward compatibility inside a major version: fields this reader does not know are kept,
unvalidated, in the record's ``extra`` and written back after the known ones, so read -> write
by an older peakline loses nothing. Fields added later (memory, GPU) are declared with
``required=False``: validated when present, omitted from output when ``None``.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Iterable, Mapping
from typing import Any, ClassVar

from peakline.model.checks import Checker, _Invalid, _at, _list_of, _object

SUM = "sum"  # merged profiles add the field up over processes


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # the model has no value of its own: the caller gives one


def _same(value: Any) -> Any:
    return value


class _Field(namedtuple("_Field", "name check dump required default factory merge",
                        defaults=(_same, True, NO_DEFAULT, None, None))):
    """One JSON field of a record. ``default``: the model's value when built without it
    (None for an optional field unless given; ``factory`` for a fresh list); ``dump``: the
    value as written; ``merge``: ``SUM`` or None (the parent's value stays)."""

    __slots__ = ()

    @property
    def has_default(self) -> bool:
        return self.factory is not None or self.default is not NO_DEFAULT or not self.required


def _optional(name: str, check: Checker, default: Any = None, *,
              merge: str | None = None) -> _Field:
    """A field the file may leave out (None by default: then not written)."""
    return _Field(name, check, required=False, default=default, merge=merge)


def _listed(name: str, check: Checker) -> _Field:
    """A required list field, an empty list in the model by default."""
    return _Field(name, _list_of(check), list, factory=list)


def _record_field(name: str, record: type[_Record], *, required: bool = True) -> _Field:
    return _Field(name, record._from_json, lambda r: r.to_dict(), required=required)


def _record_list_field(name: str, record: type[_Record], *, required: bool = True) -> _Field:
    return _Field(name, _list_of(record._from_json), lambda rs: [r.to_dict() for r in rs],
                  required=required, factory=list if required else None)


class _Record:
    """Base of every record: schema-driven from_dict/to_dict, unknown fields kept in ``extra``."""

    _FIELDS: ClassVar[tuple[_Field, ...]] = ()
    extra: dict[str, Any]

    @classmethod
    def _from_json(cls, value: Any, where: str) -> Any:
        obj = _object(value, where)
        kwargs: dict[str, Any] = {}
        known = set()
        for spec in cls._FIELDS:
            known.add(spec.name)
            if spec.name in obj:
                kwargs[spec.name] = spec.check(obj[spec.name], _at(where, spec.name))
            elif spec.required:
                raise _Invalid(where, f"missing required field '{spec.name}'")
        kwargs["extra"] = {k: v for k, v in obj.items() if k not in known}
        record = cls(**kwargs)
        record._check_invariants(where)
        return record

    def _check_invariants(self, where: str) -> None:
        """Cross-field rules; overridden where a record has them."""

    def to_dict(self) -> dict[str, Any]:
        """The record's JSON object; unknown fields read earlier follow the known ones."""
        out: dict[str, Any] = {}
        for spec in self._FIELDS:
            value = getattr(self, spec.name)
            if value is None and not spec.required:
                continue
            out[spec.name] = spec.dump(value)
        for key, value in self.extra.items():
            out.setdefault(key, value)
        return out


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Factory()  # the parameter default of a field made by a factory


def record(cls: type) -> Any:
    """``cls`` with an ``__init__`` taking its ``_FIELDS`` in that order (a field without a
    default that follows one with a default is keyword-only), plus ``extra`` for a
    ``_Record``; ``__eq__`` and ``__repr__`` over the same fields. The class body keeps its
    methods and properties.

    What dataclasses would make, made with one small ``exec`` per class: the records are
    built in the profiled process once its program has ended, where dataclasses' import
    (inspect, ...) and class processing cost 15 ms of CPU per run (docs/architecture.md)."""
    specs = list(cls._FIELDS)
    if issubclass(cls, _Record):
        specs.append(_Field("extra", _object, factory=dict))
    names = tuple(spec.name for spec in specs)
    positional: list[str] = []
    keyword_only: list[str] = []
    body: list[str] = []
    env: dict[str, Any] = {"_FACTORY": _FACTORY}
    defaulted = False
    for i, spec in enumerate(specs):
        name = spec.name
        if spec.factory is not None:
            env[f"_f{i}"] = spec.factory
            param = f"{name}=_FACTORY"
            body.append(f"self.{name} = _f{i}() if {name} is _FACTORY else {name}")
        else:
            if spec.default is not NO_DEFAULT:
                env[f"_d{i}"] = spec.default
                param = f"{name}=_d{i}"
            elif not spec.required:
                param = f"{name}=None"
            else:
                param = name
            body.append(f"self.{name} = {name}")
        if defaulted and not spec.has_default:
            keyword_only.append(param)
        else:
            positional.append(param)
        defaulted = defaulted or spec.has_default
    params = ", ".join(["self", *positional, *(["*", *keyword_only] if keyword_only else [])])
    source = f"def __init__({params}):\n    " + "\n    ".join(body or ["pass"]) + "\n"
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), env)  # noqa: S102
    init = env["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    cls._field_names = names
    cls.__eq__ = _record_eq
    cls.__repr__ = _record_repr
    cls.__hash__ = None  # mutable, compared by value
    cls.__match_args__ = names
    return cls


def _record_eq(self, other: Any) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = self._field_names
    return (tuple(getattr(self, name) for name in names)
            == tuple(getattr(other, name) for name in names))


def _record_repr(self) -> str:
    fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._field_names)
    return f"{type(self).__qualname__}({fields})"


def is_record(value: Any) -> bool:
    """Whether ``value`` is an instance of a class made by ``record``."""
    return "_field_names" in type(value).__dict__


def all_field_names(cls: type) -> tuple[str, ...]:
    """The fields of a ``record`` class, ``extra`` included (for a ``_Record``)."""
    return cls._field_names


def field_names(cls: type) -> tuple[str, ...]:
    return tuple(spec.name for spec in cls._FIELDS)


def summed(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` that merged profiles add up over processes."""
    return tuple(spec.name for spec in cls._FIELDS if spec.merge == SUM)


def carried(record: type, stats: Mapping[str, int], core_names: Iterable[str]) -> dict[str, int]:
    """The core's counters (``core_names``, peakline.model.raw) that ``record`` declares a field
    of the same name for, carried by name: 0 when the core did not send one, except for a
    field whose model default is None (absent means "not measured"): then only when sent."""
    names = set(core_names)
    out = {}
    for spec in record._FIELDS:
        if spec.name in names:
            if spec.name in stats:
                out[spec.name] = stats[spec.name]
            elif spec.default is not None:
                out[spec.name] = 0
    return out
