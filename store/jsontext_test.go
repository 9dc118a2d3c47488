package store

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

var awkwardJSONStrings = []string{"", "a", "<script>&", `quote " and \ back`, "tab\tnew\nline", "café ☕",
	"\u2028\u2029", "bad \xff utf-8", "nul \x00", "\x7f", "order.accepted"}

// fillRandomly sets every exported field v holds to a random value: nil or
// set pointers, nil, empty or filled slices and maps, awkward strings,
// times in several zones, integers of both signs.
func fillRandomly(r *rand.Rand, v reflect.Value) {
	if v.Type() == reflect.TypeFor[time.Time]() {
		zones := []*time.Location{time.UTC, time.FixedZone("", 8*3600), time.FixedZone("", -(3*3600 + 30*60))}
		v.Set(reflect.ValueOf(time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(zones[r.IntN(len(zones))])))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(awkwardJSONStrings[r.IntN(len(awkwardJSONStrings))])
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Uint64()) >> (64 - v.Type().Bits()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(r.Uint64() >> (64 - v.Type().Bits()))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(r.NormFloat64() * 1e3)
	case reflect.Pointer:
		if r.IntN(3) > 0 {
			v.Set(reflect.New(v.Type().Elem()))
			fillRandomly(r, v.Elem())
		}
	case reflect.Slice:
		switch r.IntN(3) {
		case 1:
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		case 2:
			v.Set(reflect.MakeSlice(v.Type(), 1+r.IntN(3), 3))
			for i := range v.Len() {
				fillRandomly(r, v.Index(i))
			}
		}
	case reflect.Array:
		for i := range v.Len() {
			fillRandomly(r, v.Index(i))
		}
	case reflect.Map:
		if r.IntN(3) == 0 {
			return
		}
		v.Set(reflect.MakeMap(v.Type()))
		for range r.IntN(4) {
			key, elem := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fillRandomly(r, key)
			fillRandomly(r, elem)
			v.SetMapIndex(key, elem)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillRandomly(r, v.Field(i))
			}
		}
	}
}

// What a batch writes as JSON (every event's data, its metadata, an order's
// items) is json.Marshal's text byte for byte, awkward strings included
// (HTML characters, U+2028, invalid UTF-8, control characters).
func TestJSONTextWritesAsJSONMarshal(t *testing.T) {
	t.Parallel()
	types := []reflect.Type{
		reflect.TypeFor[Meta](), reflect.TypeFor[[]domain.Item](),
		reflect.TypeFor[domain.OrderPlaced](), reflect.TypeFor[domain.OrderPaid](), reflect.TypeFor[domain.OrderQueued](),
		reflect.TypeFor[domain.OrderAccepted](), reflect.TypeFor[domain.OrderCompleted](), reflect.TypeFor[domain.OrderCancelled](),
		reflect.TypeFor[domain.OrderClosed](), reflect.TypeFor[domain.OrderExpired](), reflect.TypeFor[domain.OrderRequeued](),
		reflect.TypeFor[domain.OrderPrioritized](), reflect.TypeFor[domain.OrderPickedUp](), reflect.TypeFor[domain.OrderReopened](),
		reflect.TypeFor[domain.OrderScheduled](),
		reflect.TypeFor[domain.MerchantCreated](), reflect.TypeFor[domain.MerchantUpdated](), reflect.TypeFor[domain.MerchantSecretRotated](),
		reflect.TypeFor[domain.MerchantPaused](), reflect.TypeFor[domain.MerchantResumed](), reflect.TypeFor[domain.MerchantPeriodChanged](),
		reflect.TypeFor[domain.ProductCreated](), reflect.TypeFor[domain.ProductUpdated](), reflect.TypeFor[domain.ProductRestocked](),
		reflect.TypeFor[domain.ProductHidden](),
		reflect.TypeFor[domain.DropCreated](), reflect.TypeFor[domain.DropOpened](), reflect.TypeFor[domain.DropStarted](),
		reflect.TypeFor[domain.DropSoldOut](), reflect.TypeFor[domain.DropEnded](),
		reflect.TypeFor[domain.EntryJoined](), reflect.TypeFor[domain.EntryInvited](), reflect.TypeFor[domain.EntryOrdered](),
		reflect.TypeFor[domain.EntryPurchased](), reflect.TypeFor[domain.EntryLapsed](), reflect.TypeFor[domain.EntrySoldOutEvent](),
	}
	r := rand.New(rand.NewPCG(31, 3))
	for _, typ := range types {
		for range 300 {
			v := reflect.New(typ)
			fillRandomly(r, v.Elem())
			// Events carry their data as values; the pointer is encoded the same.
			for _, x := range []any{v.Elem().Interface(), v.Interface()} {
				want, err := json.Marshal(x)
				require.NoError(t, err, typ)
				got, err := jsonText(x)
				require.NoError(t, err, typ)
				require.Equal(t, string(want), got, typ)
			}
		}
	}
}
