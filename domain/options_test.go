package domain_test

import (
	"fmt"
	"github.com/google/uuid"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/domain"
)

// teaGroups is a milk tea's menu: one size (large costs more and weighs
// more), an optional sugar level, and up to two toppings.
func teaGroups() []domain.OptionGroup {
	return []domain.OptionGroup{
		{ID: "size", Name: "Size", MinSelect: 1, MaxSelect: 1, Options: []domain.Option{
			{ID: "regular", Name: "Regular"}, {ID: "large", Name: "Large", PriceDeltaCents: 80, LoadUnits: 1},
		}},
		{ID: "sugar", Name: "Sugar", MinSelect: 0, MaxSelect: 1, Options: []domain.Option{
			{ID: "less", Name: "Less sugar"}, {ID: "none", Name: "No sugar", PriceDeltaCents: -10},
		}},
		{ID: "toppings", Name: "Toppings", MinSelect: 0, MaxSelect: 2, Options: []domain.Option{
			{ID: "pearls", Name: "Pearls", PriceDeltaCents: 60}, {ID: "jelly", Name: "Jelly", PriceDeltaCents: 50}, {ID: "pudding", Name: "Pudding", PriceDeltaCents: 70},
		}},
	}
}

func TestValidateOptionGroups(t *testing.T) {
	t.Parallel()
	with := func(change func(g []domain.OptionGroup) []domain.OptionGroup) []domain.OptionGroup {
		return change(teaGroups())
	}
	manyGroups := make([]domain.OptionGroup, domain.MaxOptionGroups+1)
	for i := range manyGroups {
		manyGroups[i] = domain.OptionGroup{ID: fmt.Sprint("g", i), Name: "G", MaxSelect: 1, Options: []domain.Option{{ID: fmt.Sprint("o", i), Name: "O"}}}
	}
	cases := []struct {
		name   string
		groups []domain.OptionGroup
		base   int64
		field  string // "" when valid
	}{
		{"a milk tea", teaGroups(), 450, ""},
		{"no groups", nil, 0, ""},
		{"too many groups", manyGroups, 0, "option_groups must have at most"},
		{"group without id", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].ID = ""; return g }), 450, "option_groups[1].id"},
		{"group name empty", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[0].Name = " "; return g }), 450, "option_groups[0].name"},
		{"option name too long", with(func(g []domain.OptionGroup) []domain.OptionGroup {
			g[2].Options[1].Name = strings.Repeat("x", domain.MaxOptionNameLength+1)
			return g
		}), 450, "option_groups[2].options[1].name"},
		{"min_select above 10", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[0].MinSelect = 11; return g }), 450, "option_groups[0].min_select"},
		{"max_select 0", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[2].MaxSelect = 0; return g }), 450, "option_groups[2].max_select"},
		{"max_select 11", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[2].MaxSelect = 11; return g }), 450, "option_groups[2].max_select"},
		{"min above max", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[2].MinSelect = 2; g[2].MaxSelect = 1; return g }), 450, "option_groups[2].min_select must not exceed max_select"},
		{"min above the options", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].MinSelect, g[1].MaxSelect = 3, 3; return g }), 450, "option_groups[1].min_select must not exceed the number"},
		{"no options", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].Options = nil; return g }), 450, "option_groups[1].options"},
		{"option id repeated across groups", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[2].Options[0].ID = "large"; return g }), 450, "option_groups[2].options[0].id repeats the id of option_groups[0].options[1].id"},
		{"group id equal to an option's", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].ID = "regular"; return g }), 450, "option_groups[1].id repeats"},
		{"load_units 101", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[0].Options[1].LoadUnits = 101; return g }), 450, "option_groups[0].options[1].load_units"},
		{"load_units negative", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[0].Options[1].LoadUnits = -1; return g }), 450, "option_groups[0].options[1].load_units"},
		{"delta too large", with(func(g []domain.OptionGroup) []domain.OptionGroup {
			g[0].Options[1].PriceDeltaCents = domain.MaxPriceCents + 1
			return g
		}), 450, "option_groups[0].options[1].price_delta_cents"},
		{"a discount down to 0", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].Options[1].PriceDeltaCents = -450; return g }), 450, ""},
		{"a discount below 0", with(func(g []domain.OptionGroup) []domain.OptionGroup { g[1].Options[1].PriceDeltaCents = -451; return g }), 450, "option_groups[1]: its price deltas could bring"},
		{"two discounts of one group below 0", with(func(g []domain.OptionGroup) []domain.OptionGroup {
			g[2].Options[0].PriceDeltaCents, g[2].Options[1].PriceDeltaCents = -300, -200
			return g
		}), 450, "option_groups[2]: its price deltas"},
		{"a required discount below 0", []domain.OptionGroup{{ID: "g", Name: "G", MinSelect: 1, MaxSelect: 1, Options: []domain.Option{{ID: "a", Name: "A", PriceDeltaCents: -100}}}}, 99, "option_groups[0]: its price deltas"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := domain.ValidateOptionGroups(tc.groups, tc.base)
			if tc.field == "" {
				require.NoError(t, err)
				return
			}
			require.Equal(t, domain.CodeValidation, domain.ErrorCode(err), "error: %v", err)
			require.Contains(t, domain.ErrorMessage(err), tc.field)
		})
	}
}

func TestAssignOptionIDsKeepsGivenOnes(t *testing.T) {
	t.Parallel()
	n := 0
	next := func() string { n++; return fmt.Sprint("new", n) }
	in := []domain.OptionGroup{{Name: "Size", Options: []domain.Option{{ID: "kept", Name: "Regular"}, {Name: "Large"}}}}
	out := domain.AssignOptionIDs(in, next)
	require.Equal(t, "new1", out[0].ID)
	require.Equal(t, "kept", out[0].Options[0].ID)
	require.Equal(t, "new2", out[0].Options[1].ID)
	require.Empty(t, in[0].ID, "the caller's groups are left as they were")
	require.Empty(t, in[0].Options[1].ID)
}

func TestPlaceWithOptions(t *testing.T) {
	t.Parallel()
	prods := map[uuid.UUID]domain.ProductRef{
		testID("tea"):    {ID: testID("tea"), MerchantID: merchantID, PriceCents: 450, LoadUnits: 1, OptionGroups: teaGroups()},
		testID("cake"):   {ID: testID("cake"), MerchantID: merchantID, PriceCents: 300, LoadUnits: 2},
		testID("gone"):   {ID: testID("gone"), MerchantID: merchantID, PriceCents: 300, Unavailable: true},
		testID("hidden"): {ID: testID("hidden"), MerchantID: merchantID, PriceCents: 300, Hidden: true},
		testID("other"):  {ID: testID("other"), MerchantID: testID("another"), PriceCents: 300, OptionGroups: []domain.OptionGroup{{ID: "og", Name: "O", MaxSelect: 1, Options: []domain.Option{{ID: "foreign", Name: "F"}}}}},
	}
	tea := func(q int, options ...string) domain.LineRequest {
		return domain.LineRequest{ProductID: testID("tea"), Quantity: q, Options: options}
	}
	cases := []struct {
		name    string
		lines   []domain.LineRequest
		code    domain.Code
		detail  string
		total   int64
		load    int
		options [][]string // the names echoed per line
	}{
		{"a large less-sugar tea with pearls", []domain.LineRequest{tea(1, "pearls", "less", "large")}, "", "", 450 + 80 + 60, 2, [][]string{{"Large", "Less sugar", "Pearls"}}},
		{"two regular teas and a cake", []domain.LineRequest{tea(2, "regular"), {ProductID: testID("cake"), Quantity: 1}}, "", "", 2*450 + 300, 2*1 + 2, [][]string{{"Regular"}, nil}},
		{"a discount", []domain.LineRequest{tea(3, "regular", "none")}, "", "", 3 * 440, 3, [][]string{{"Regular", "No sugar"}}},
		{"two toppings", []domain.LineRequest{tea(1, "regular", "pearls", "jelly")}, "", "", 450 + 60 + 50, 1, [][]string{{"Regular", "Pearls", "Jelly"}}},
		{"missing required group", []domain.LineRequest{tea(1, "pearls")}, domain.CodeValidation, `items[0]: group "Size" (size) needs at least 1`, 0, 0, nil},
		{"too many in a group", []domain.LineRequest{tea(1, "regular", "pearls", "jelly", "pudding")}, domain.CodeValidation, `items[0]: group "Toppings" (toppings) allows at most 2`, 0, 0, nil},
		{"two sizes", []domain.LineRequest{tea(1, "regular", "large")}, domain.CodeValidation, `group "Size" (size) allows at most 1`, 0, 0, nil},
		{"an option of another product", []domain.LineRequest{{ProductID: testID("cake"), Quantity: 1}, tea(1, "regular", "foreign")}, domain.CodeValidation, `items[1].options[1]: "foreign" is not an option`, 0, 0, nil},
		{"an option on a product without groups", []domain.LineRequest{{ProductID: testID("cake"), Quantity: 1, Options: []string{"regular"}}}, domain.CodeValidation, `items[0].options[0]: "regular" is not an option`, 0, 0, nil},
		{"a repeated option", []domain.LineRequest{tea(1, "regular", "pearls", "pearls")}, domain.CodeValidation, `items[0].options[2] repeats option "pearls"`, 0, 0, nil},
		{"unavailable", []domain.LineRequest{tea(1, "regular"), {ProductID: testID("gone"), Quantity: 1}}, domain.CodeProductUnavailable, "items[1].product_id", 0, 0, nil},
		{"hidden", []domain.LineRequest{{ProductID: testID("hidden"), Quantity: 1}}, domain.CodeProductUnavailable, "items[0].product_id", 0, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := domain.Place(domain.PlaceParams{
				OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c", Unit: domain.UnitItems,
				Lines: tc.lines, Products: prods, PaymentDeadline: t0.Add(deadline),
			}, t0)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err), "error: %v", err)
				require.Contains(t, domain.ErrorMessage(err), tc.detail)
				require.Empty(t, events)
				return
			}
			require.NoError(t, err)
			placed := events[0].Data.(domain.OrderPlaced)
			require.Equal(t, tc.total, placed.TotalCents)
			require.Equal(t, tc.load, placed.Load)
			var sum int64
			for i, it := range placed.Items {
				sum += it.PriceCents * int64(it.Quantity)
				var names []string
				var deltas int64
				for _, o := range it.Options {
					names = append(names, o.Name)
					deltas += o.PriceDeltaCents
				}
				require.Equal(t, tc.options[i], names, "line %d echoes its options in the menu's order", i)
				require.Equal(t, prods[it.ProductID].PriceCents+deltas, it.PriceCents, "a unit's price is the product's and its options'")
			}
			require.Equal(t, tc.total, sum, "the total is the sum of the lines")
		})
	}
}

func TestOrderLoadCountsOptionsOnlyInItems(t *testing.T) {
	t.Parallel()
	prods := map[uuid.UUID]domain.ProductRef{testID("tea"): {ID: testID("tea"), MerchantID: merchantID, PriceCents: 450, LoadUnits: 1, OptionGroups: teaGroups()}}
	events, err := domain.Place(domain.PlaceParams{
		OrderID: testID("o"), MerchantID: merchantID, CustomerID: "c", Unit: domain.UnitOrders,
		Lines: []domain.LineRequest{{ProductID: testID("tea"), Quantity: 4, Options: []string{"large"}}}, Products: prods,
	}, t0)
	require.NoError(t, err)
	require.Equal(t, 1, events[0].Data.(domain.OrderPlaced).Load, "a merchant counting orders counts one whatever the options")
}

func ptrTo[T any](v T) *T { return &v }

func TestProductUpdate(t *testing.T) {
	t.Parallel()
	created, err := domain.CreateProduct(domain.ProductCreated{ProductID: testID("t"), MerchantID: testID("m"), Name: "Milk tea", PriceCents: 450, OptionGroups: teaGroups(), CreatedAt: t0})
	require.NoError(t, err)
	tea, err := domain.Product{}.Apply(created...)
	require.NoError(t, err)
	hidden, err := tea.Apply(tea.Hide(t0)...)
	require.NoError(t, err)
	cheaper := teaGroups()
	cheaper[1].Options[1].PriceDeltaCents = -400
	cases := []struct {
		name    string
		product domain.Product
		patch   domain.ProductPatch
		code    domain.Code
		detail  string
		events  int
		check   func(t *testing.T, p domain.Product)
	}{
		{"a new price", tea, domain.ProductPatch{PriceCents: ptrTo(int64(500))}, "", "", 1, func(t *testing.T, p domain.Product) {
			require.Equal(t, int64(500), p.PriceCents)
			require.Len(t, p.OptionGroups, 3, "the groups are kept")
		}},
		{"sold out today", tea, domain.ProductPatch{Available: ptrTo(false)}, "", "", 1, func(t *testing.T, p domain.Product) { require.True(t, p.Unavailable) }},
		{"available again is a no-op while available", tea, domain.ProductPatch{Available: ptrTo(true)}, "", "", 0, nil},
		{"the same name is a no-op", tea, domain.ProductPatch{Name: ptrTo("Milk tea"), OptionGroups: ptrTo(teaGroups())}, "", "", 0, nil},
		{"no groups", tea, domain.ProductPatch{OptionGroups: &[]domain.OptionGroup{}}, "", "", 1, func(t *testing.T, p domain.Product) { require.Empty(t, p.OptionGroups) }},
		{"an empty name", tea, domain.ProductPatch{Name: ptrTo("")}, domain.CodeValidation, "name", 0, nil},
		{"a negative price", tea, domain.ProductPatch{PriceCents: ptrTo(int64(-1))}, domain.CodeValidation, "price_cents", 0, nil},
		{"a price the groups' discounts would take below 0", tea, domain.ProductPatch{PriceCents: ptrTo(int64(5))}, domain.CodeValidation, "option_groups[1]: its price deltas", 0, nil},
		{"groups whose discount the price does not cover", tea, domain.ProductPatch{PriceCents: ptrTo(int64(300)), OptionGroups: ptrTo(cheaper)}, domain.CodeValidation, "option_groups[1]", 0, nil},
		{"a group over max_select", tea, domain.ProductPatch{OptionGroups: &[]domain.OptionGroup{{ID: "g", Name: "G", MaxSelect: 11, Options: []domain.Option{{ID: "o", Name: "O"}}}}}, domain.CodeValidation, "option_groups[0].max_select", 0, nil},
		{"a hidden product", hidden, domain.ProductPatch{PriceCents: ptrTo(int64(500))}, domain.CodeNotFound, "removed", 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			events, err := tc.product.Update(tc.patch, t0)
			if tc.code != "" {
				require.Equal(t, tc.code, domain.ErrorCode(err), "error: %v", err)
				require.Contains(t, domain.ErrorMessage(err), tc.detail)
				return
			}
			require.NoError(t, err)
			require.Len(t, events, tc.events)
			after, err := tc.product.Apply(events...)
			require.NoError(t, err)
			if tc.check != nil {
				tc.check(t, after)
			}
		})
	}
	require.Empty(t, hidden.Hide(t0), "hiding twice records nothing")
	require.True(t, hidden.Hidden)
}

func TestCreateProductValidatesItsOptions(t *testing.T) {
	t.Parallel()
	groups := teaGroups()
	groups[2].MaxSelect = 0
	_, err := domain.CreateProduct(domain.ProductCreated{ProductID: testID("t"), MerchantID: testID("m"), Name: "Milk tea", PriceCents: 450, OptionGroups: groups, CreatedAt: t0})
	require.Equal(t, domain.CodeValidation, domain.ErrorCode(err))
	require.Contains(t, domain.ErrorMessage(err), "option_groups[2].max_select")
}
