"""How a profile record is declared: once, as its JSON fields, from which everything follows.

A record class lists its fields in ``_FIELDS`` (in the order the file writes them), each a
``_Field``: the JSON name, its checker (peakline.model.checks), whether the file must hold it,
the model's default, how it is written, and how merged profiles combine it. ``@record`` makes
the class a dataclass with exactly those fields (plus ``extra``), so that

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

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from peakline.model.checks import Checker, _Invalid, _at, _list_of, _object

SUM = "sum"  # merged profiles add the field up over processes


class _NoDefault:
    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()  # the model has no value of its own: the caller gives one


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class _Field:
    """One JSON field of a record. ``default``: the model's value when built without it
    (None for an optional field unless given; ``factory`` for a fresh list); ``dump``: the
    value as written; ``merge``: ``SUM`` or None (the parent's value stays)."""

    name: str
    check: Checker
    dump: Callable[[Any], Any] = _same
    required: bool = True
    default: Any = NO_DEFAULT
    factory: Callable[[], Any] | None = None
    merge: str | None = None

    def dataclass_field(self, *, kw_only: bool) -> Any:
        if self.factory is not None:
            return dataclasses.field(default_factory=self.factory)
        if self.default is not NO_DEFAULT:
            return dataclasses.field(default=self.default)
        if not self.required:
            return dataclasses.field(default=None)
        return dataclasses.field(kw_only=kw_only) if kw_only else dataclasses.field()


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


def record(cls: type) -> Any:
    """``cls`` as a dataclass whose fields are its ``_FIELDS``, in that order (a field without
    a default that follows one with a default is keyword-only), plus ``extra`` for a
    ``_Record``. The class body keeps its methods and properties."""
    fields: list[tuple[str, Any, Any]] = []
    defaulted = False
    for spec in cls._FIELDS:
        has_default = (spec.factory is not None or spec.default is not NO_DEFAULT
                       or not spec.required)
        fields.append((spec.name, Any, spec.dataclass_field(kw_only=defaulted and not has_default)))
        defaulted = defaulted or has_default
    if issubclass(cls, _Record):
        fields.append(("extra", dict, dataclasses.field(default_factory=dict)))
    namespace = {key: value for key, value in vars(cls).items()
                 if key not in ("__dict__", "__weakref__") and not key.startswith("__annotat")}
    made = dataclasses.make_dataclass(cls.__name__, fields, bases=cls.__bases__,
                                      namespace=namespace)
    made.__module__, made.__qualname__ = cls.__module__, cls.__qualname__
    return made


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
