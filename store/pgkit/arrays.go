package pgkit

import (
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// wrapArrays hands pgx the slices the write path sends as columns as arrays
// whose elements it reads through pointers into the slice. pgx's own
// wrappers return each element by value as an interface, which allocates
// for every element wider than a word (an id, a string, a time) and again
// for an id to reach the uuid codec, and they walk a slice of pgtype's
// nullable values by reflection. Each element type here is one pgx's codecs
// encode through an interface the pointer satisfies, so the same bytes go
// out; a slice whose column's codec does not take it falls to pgx's next
// wrapper, as before.
func wrapArrays(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	switch v := value.(type) {
	case []uuid.UUID:
		return wrapPointers(v, func(p *uuid.UUID) any { return p })
	case [][16]byte:
		return wrapPointers(v, func(p *[16]byte) any { return (*uuid.UUID)(p) })
	case []string:
		return wrapPointers(v, func(p *string) any { return (*textElem)(p) })
	case []time.Time:
		return wrapPointers(v, func(p *time.Time) any { return (*timeElem)(p) })
	case []int64:
		return wrapPointers(v, func(p *int64) any { return (*int64Elem)(p) })
	case []int32:
		return wrapPointers(v, func(p *int32) any { return (*int32Elem)(p) })
	case []pgtype.Text:
		return wrapPointers(v, func(p *pgtype.Text) any { return p })
	case []pgtype.Timestamptz:
		return wrapPointers(v, func(p *pgtype.Timestamptz) any { return p })
	case []pgtype.Int8:
		return wrapPointers(v, func(p *pgtype.Int8) any { return p })
	}
	return nil, nil, false
}

// wrapPointers wraps s for elem.
func wrapPointers[T any](s []T, elem func(*T) any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	return &pointerArrayPlan[T]{elem: elem}, pointerArray[T]{s: s, elem: elem}, true
}

type pointerArrayPlan[T any] struct {
	next pgtype.EncodePlan
	elem func(*T) any
}

func (p *pointerArrayPlan[T]) SetNext(next pgtype.EncodePlan) { p.next = next }

// Encode grows buf once to what the column takes (argSize): pgx starts each
// statement's parameters in a small buffer, which a column of events' JSON,
// or a batch's column of ids, would otherwise regrow by doubling, copying
// what it holds each time.
func (p *pointerArrayPlan[T]) Encode(value any, buf []byte) ([]byte, error) {
	buf = slices.Grow(buf, argSize(value))
	return p.next.Encode(pointerArray[T]{s: value.([]T), elem: p.elem}, buf)
}

// textsSize is what a text or jsonb array of s takes at most: its header,
// and for each element its length, jsonb's version byte and the text.
func textsSize(s []string) int {
	n := 20 + 5*len(s)
	for _, t := range s {
		n += len(t)
	}
	return n
}

// pointerArray is a one-dimensional array for pgx's array codec; a nil
// slice is NULL, as pgx sends any nil slice. An interface holds a pointer
// without a copy.
type pointerArray[T any] struct {
	s    []T
	elem func(*T) any
}

func (a pointerArray[T]) Dimensions() []pgtype.ArrayDimension {
	if a.s == nil {
		return nil
	}
	return []pgtype.ArrayDimension{{Length: int32(len(a.s)), LowerBound: 1}}
}

func (a pointerArray[T]) Index(i int) any { return a.elem(&a.s[i]) }

func (a pointerArray[T]) IndexType() any { return a.elem(new(T)) }

// textElem is a string as pgx's text codecs take a pgtype.Text, and as
// jsonbCodec takes it for jsonb.
type textElem string

func (t *textElem) TextValue() (pgtype.Text, error) {
	return pgtype.Text{String: string(*t), Valid: true}, nil
}

// timeElem is a time as pgx's timestamp codecs take the time.Time it wraps
// itself.
type timeElem time.Time

func (t *timeElem) TimestamptzValue() (pgtype.Timestamptz, error) {
	return pgtype.Timestamptz{Time: time.Time(*t), Valid: true}, nil
}

func (t *timeElem) TimestampValue() (pgtype.Timestamp, error) {
	return pgtype.Timestamp{Time: time.Time(*t), Valid: true}, nil
}

// int64Elem and int32Elem are integers as pgx's integer codecs take the
// int64 they wrap them in, range checks included.
type int64Elem int64

func (n *int64Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

type int32Elem int32

func (n *int32Elem) Int64Value() (pgtype.Int8, error) {
	return pgtype.Int8{Int64: int64(*n), Valid: true}, nil
}

// jsonbCodec is pgx's jsonb codec that also writes a textElem in binary as
// the JSON text it holds, as pgx writes a string; pgx's own would reach the
// string by reflection. (In text, pgx writes any pgtype.TextValuer's text
// before it asks a codec.) Every other value it leaves to pgx's.
type jsonbCodec struct{ pgtype.Codec }

func (c jsonbCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if _, ok := value.(*textElem); ok && format == pgtype.BinaryFormatCode {
		return encodeJSONBText{}
	}
	return c.Codec.PlanEncode(m, oid, format, value)
}

// encodeJSONBText writes jsonb's binary form: its version byte, then the
// text.
type encodeJSONBText struct{}

func (encodeJSONBText) Encode(value any, buf []byte) ([]byte, error) {
	return append(append(buf, 1), *value.(*textElem)...), nil
}
