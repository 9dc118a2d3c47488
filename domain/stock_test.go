package domain_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

func TestSoldOut(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                string
		available, quantity int
		want                domain.Code
	}{
		{"enough", 3, 2, ""},
		{"the last units", 2, 2, ""},
		{"one short", 1, 2, domain.CodeSoldOut},
		{"none left", 0, 1, domain.CodeSoldOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := domain.SoldOut(testID("p"), tc.available, tc.quantity)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, domain.ErrorCode(err))
		})
	}
}

func TestOverPurchaseLimit(t *testing.T) {
	t.Parallel()
	two := 2
	for _, tc := range []struct {
		name     string
		limit    *int
		quantity int
		want     domain.Code
	}{
		{"no limit", nil, 1000, ""},
		{"under", &two, 1, ""},
		{"at", &two, 2, ""},
		{"over in one line", &two, 3, domain.CodePurchaseLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := domain.OverPurchaseLimit(testID("p"), tc.limit, tc.quantity)
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, tc.want, domain.ErrorCode(err))
		})
	}
	require.Equal(t, domain.CodePurchaseLimit, domain.ErrorCode(domain.PurchaseLimitReached(testID("p"), 2)))
}

func TestPurchaseLimitAcrossOrders(t *testing.T) {
	t.Parallel()
	one, three := 1, 3
	limited, other, unlimited := testID("limited"), testID("other"), testID("unlimited")
	claims := domain.ClaimsOf([]domain.StockLine{
		{ProductID: limited, Quantity: 2, Limit: &three},
		{ProductID: unlimited, Quantity: 5},
		{ProductID: other, Quantity: 1, Limit: &one},
	})
	require.Equal(t, []domain.Claim{
		{ProductID: limited, Quantity: 2, Limit: 3, MostHeld: 1},
		{ProductID: other, Quantity: 1, Limit: 1, MostHeld: 0},
	}, claims, "one claim a limited line, in the lines' order")
	for _, tc := range []struct {
		name                  string
		held, quantity, limit int
		claims                bool
	}{
		{"a first order", 0, 1, 1, true},
		{"a second order of a limit of one", 1, 1, 1, false},
		{"up to the limit", 1, 2, 3, true},
		{"one past the limit", 2, 2, 3, false},
		{"units given back by an ended order", 0, 3, 3, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := domain.ClaimsOf([]domain.StockLine{{ProductID: limited, Quantity: tc.quantity, Limit: &tc.limit}})
			require.Equal(t, tc.claims, tc.held <= c[0].MostHeld)
		})
	}
}

func TestTakeFromHeld(t *testing.T) {
	t.Parallel()
	held := []domain.BucketTake{{Bucket: 2, Units: 1}, {Bucket: 5, Units: 0}, {Bucket: 7, Units: 4}}
	for _, tc := range []struct {
		name     string
		held     []domain.BucketTake
		quantity int
		want     domain.BucketTake
		ok       bool
	}{
		{"none held", nil, 1, domain.BucketTake{}, false},
		{"the first held that has them", held, 1, domain.BucketTake{Bucket: 2, Units: 1}, true},
		{"past those short of them", held, 3, domain.BucketTake{Bucket: 7, Units: 3}, true},
		{"all of a bucket", held, 4, domain.BucketTake{Bucket: 7, Units: 4}, true},
		{"none has them all, though together they do", held, 5, domain.BucketTake{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := domain.TakeFromHeld(tc.held, tc.quantity)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestTakeFromBuckets(t *testing.T) {
	t.Parallel()
	buckets := []domain.BucketTake{{Bucket: 0, Units: 1}, {Bucket: 1, Units: 0}, {Bucket: 2, Units: 3}, {Bucket: 3, Units: 5}}
	for _, tc := range []struct {
		name     string
		quantity int
		want     []domain.BucketTake
		refused  bool
	}{
		{"one bucket enough", 1, []domain.BucketTake{{Bucket: 0, Units: 1}}, false},
		{"spills over, skipping the empty", 3, []domain.BucketTake{{Bucket: 0, Units: 1}, {Bucket: 2, Units: 2}}, false},
		{"every unit", 9, []domain.BucketTake{{Bucket: 0, Units: 1}, {Bucket: 2, Units: 3}, {Bucket: 3, Units: 5}}, false},
		{"one more than all", 10, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := domain.TakeFromBuckets(testID("p"), buckets, tc.quantity)
			if tc.refused {
				require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err))
				require.Nil(t, got)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	_, err := domain.TakeFromBuckets(testID("p"), nil, 1)
	require.Equal(t, domain.CodeSoldOut, domain.ErrorCode(err), "a product without buckets has nothing to give")
}

func TestRefuseStock(t *testing.T) {
	t.Parallel()
	one, three := 1, 3
	none := 0
	for _, tc := range []struct {
		name  string
		lines []domain.StockLine
		want  domain.Code
	}{
		{"no limit, left unknown", []domain.StockLine{{ProductID: testID("a"), Quantity: 5}}, ""},
		{"within the limit and what is left", []domain.StockLine{{ProductID: testID("a"), Quantity: 1, Limit: &one, Left: &three}}, ""},
		{"over the per-customer limit", []domain.StockLine{{ProductID: testID("a"), Quantity: 2, Limit: &one}}, domain.CodePurchaseLimit},
		{"more than is known to be left", []domain.StockLine{{ProductID: testID("a"), Quantity: 4, Left: &three}}, domain.CodeSoldOut},
		{"known sold out", []domain.StockLine{{ProductID: testID("a"), Quantity: 1, Left: &none}}, domain.CodeSoldOut},
		{"sold out is said before the limit of the same line", []domain.StockLine{{ProductID: testID("a"), Quantity: 2, Limit: &one, Left: &none}}, domain.CodeSoldOut},
		{"a later line refuses the order", []domain.StockLine{{ProductID: testID("a"), Quantity: 1}, {ProductID: testID("b"), Quantity: 2, Limit: &one}}, domain.CodePurchaseLimit},
	} {
		err := domain.RefuseStock(tc.lines)
		if tc.want == "" {
			require.NoError(t, err, tc.name)
			continue
		}
		require.Equal(t, tc.want, domain.ErrorCode(err), tc.name)
	}
}

func TestSettleBatchTakes(t *testing.T) {
	t.Parallel()
	a, b := testID("a"), testID("b")
	took := func(p uuid.UUID) domain.BatchTake { return domain.BatchTake{ProductID: p, Took: true} }
	missed := func(p uuid.UUID) domain.BatchTake { return domain.BatchTake{ProductID: p} }
	refused := func(p uuid.UUID, took bool) domain.BatchTake {
		return domain.BatchTake{ProductID: p, ClaimRefused: true, Took: took}
	}
	keep, refuse, turn := domain.KeepTake, domain.RefuseClaim, domain.TakeInTurn
	for _, tc := range []struct {
		name  string
		takes []domain.BatchTake
		want  []domain.TakeOutcome
	}{
		{"every order took", []domain.BatchTake{took(a), took(a), took(b)}, []domain.TakeOutcome{keep, keep, keep}},
		{"after a miss, the later orders of its product take in turn",
			[]domain.BatchTake{took(a), missed(a), took(a), took(b), missed(a)}, []domain.TakeOutcome{keep, turn, turn, keep, turn}},
		{"a refused claim is refused, whether it took or not",
			[]domain.BatchTake{refused(a, true), refused(a, false), took(a)}, []domain.TakeOutcome{refuse, refuse, keep}},
		{"a refused claim's miss keeps no one from its units",
			[]domain.BatchTake{refused(a, false), took(a)}, []domain.TakeOutcome{refuse, keep}},
		{"a refused claim after a miss is still refused",
			[]domain.BatchTake{missed(a), refused(a, true), took(a)}, []domain.TakeOutcome{turn, refuse, turn}},
		{"none", nil, []domain.TakeOutcome{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, domain.SettleBatchTakes(tc.takes))
		})
	}
}
