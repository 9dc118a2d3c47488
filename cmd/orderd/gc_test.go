package main

import (
	"runtime/debug"
	"testing"
)

func TestServerCollectsLessOftenUnlessGOGCIsSet(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	for _, tc := range []struct {
		name string
		env  map[string]string
		want int
	}{
		{"GOGC unset", map[string]string{}, serverGCPercent},
		{"GOGC empty", map[string]string{"GOGC": ""}, serverGCPercent},
		{"GOGC set", map[string]string{"GOGC": "100"}, 100},
		{"GOGC off", map[string]string{"GOGC": "off"}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			tuneGC(func(name string) (string, bool) { v, ok := tc.env[name]; return v, ok }, serverGCPercent)
			if got := debug.SetGCPercent(100); got != tc.want {
				t.Fatalf("GC percent %d, want %d", got, tc.want)
			}
		})
	}
}
