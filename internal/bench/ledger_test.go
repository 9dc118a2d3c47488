package bench

import "testing"

// TestLedgerIsJudgedFromItsFigures: each of the ledger's goals is judged
// from what the run measured, and a figure that is missing or a log short
// of a million meets nothing.
func TestLedgerIsJudgedFromItsFigures(t *testing.T) {
	good := func() *Result {
		return &Result{InvariantsOK: true, P99ms: 9.5, Extra: map[string]any{
			"events": int64(1_000_208), "checkpoint_max_ms": 1900.0, "audit_s": 59.0, "proofs": 2000}}
	}
	if !judgeLedger(good()) {
		t.Fatal("a run within every goal is judged not to meet them")
	}
	for name, spoil := range map[string]func(r *Result){
		"a slow checkpoint":  func(r *Result) { r.Extra["checkpoint_max_ms"] = 2001.0 },
		"slow proofs":        func(r *Result) { r.P99ms = 10.5 },
		"a slow audit":       func(r *Result) { r.Extra["audit_s"] = 61.0 },
		"a small log":        func(r *Result) { r.Extra["events"] = int64(999_999) },
		"no proof":           func(r *Result) { r.Extra["proofs"] = 0 },
		"no audit measured":  func(r *Result) { delete(r.Extra, "audit_s") },
		"a broken history":   func(r *Result) { r.InvariantsOK = false },
		"no checkpoint made": func(r *Result) { delete(r.Extra, "checkpoint_max_ms") },
	} {
		r := good()
		spoil(r)
		if judgeLedger(r) {
			t.Errorf("%s: judged to meet the goals", name)
		}
	}
}
