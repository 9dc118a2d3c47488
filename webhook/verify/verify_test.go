package verify_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderd/orderd/webhook/verify"
)

var sentAt = time.Unix(1_900_000_000, 0)

func TestVerify(t *testing.T) {
	t.Parallel()
	body := []byte(`{"id":"d1","type":"order.accepted"}`)
	good := verify.Sign("whsec", sentAt, body)
	other := verify.Sign("rotated", sentAt, body)
	tests := map[string]struct {
		header string
		body   string
		now    time.Time
		want   error
	}{
		"fresh":                  {header: good, now: sentAt.Add(time.Second)},
		"exactly five minutes":   {header: good, now: sentAt.Add(verify.MaxAge)},
		"receiver clock behind":  {header: good, now: sentAt.Add(-verify.MaxAge)},
		"one second too old":     {header: good, now: sentAt.Add(verify.MaxAge + time.Second), want: verify.ErrTooOld},
		"from the future":        {header: good, now: sentAt.Add(-verify.MaxAge - time.Second), want: verify.ErrTooOld},
		"a day-old replay":       {header: good, now: sentAt.Add(24 * time.Hour), want: verify.ErrTooOld},
		"another body":           {header: good, body: `{"id":"d1","type":"order.cancelled"}`, now: sentAt, want: verify.ErrMismatch},
		"another secret":         {header: other, now: sentAt, want: verify.ErrMismatch},
		"time moved":             {header: strings.Replace(good, "t=1900000000", "t=1900000001", 1), now: sentAt, want: verify.ErrMismatch},
		"two signatures, one ok": {header: other + ",v1=" + strings.SplitN(good, "v1=", 2)[1], now: sentAt},
		"unknown scheme skipped": {header: good + ",v2=zzz", now: sentAt},
		"empty":                  {header: "", now: sentAt, want: verify.ErrMalformed},
		"no time":                {header: strings.SplitN(good, ",", 2)[1], now: sentAt, want: verify.ErrMalformed},
		"no signature":           {header: "t=1900000000", now: sentAt, want: verify.ErrMalformed},
		"two times":              {header: "t=1," + good, now: sentAt, want: verify.ErrMalformed},
		"negative time":          {header: strings.Replace(good, "t=", "t=-", 1), now: sentAt, want: verify.ErrMalformed},
		"huge time":              {header: strings.Replace(good, "t=1900000000", "t=99999999999999999999", 1), now: sentAt, want: verify.ErrMalformed},
		"short signature":        {header: good[:len(good)-2], now: sentAt, want: verify.ErrMalformed},
		"old v1 header":          {header: "sha256=" + strings.SplitN(good, "v1=", 2)[1], now: sentAt, want: verify.ErrMalformed},
		"oversized":              {header: good + "," + strings.Repeat("x=1,", 300), now: sentAt, want: verify.ErrMalformed},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := body
			if tt.body != "" {
				b = []byte(tt.body)
			}
			err := verify.Verify("whsec", tt.header, b, tt.now)
			if tt.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.want)
		})
	}
}

// TestSignMatchesTheDocumentedRecipe is docs/webhooks.md's openssl line in Go:
// HMAC-SHA256 of "<unix>.<body>", hex.
func TestSignMatchesTheDocumentedRecipe(t *testing.T) {
	t.Parallel()
	body := []byte(`{"a":1}`)
	m := hmac.New(sha256.New, []byte("whsec"))
	m.Write([]byte("1900000000." + string(body)))
	require.Equal(t, "t=1900000000,v1="+hex.EncodeToString(m.Sum(nil)), verify.Sign("whsec", sentAt, body))
}

func TestRequest(t *testing.T) {
	t.Parallel()
	body := `{"a":1}`
	r := httptest.NewRequest("POST", "/hooks", strings.NewReader(body))
	r.Header.Set(verify.HeaderTimestamp, strconv.FormatInt(sentAt.Unix(), 10))
	r.Header.Set(verify.HeaderSignature, verify.Sign("whsec", sentAt, []byte(body)))
	got, err := verify.Request(r, "whsec", sentAt)
	require.NoError(t, err)
	require.Equal(t, body, string(got))

	r = httptest.NewRequest("POST", "/hooks", strings.NewReader(strings.Repeat(" ", 1<<20+1)))
	r.Header.Set(verify.HeaderSignature, verify.Sign("whsec", sentAt, nil))
	_, err = verify.Request(r, "whsec", sentAt)
	require.ErrorContains(t, err, "over")
}

// FuzzVerify: no header or body makes Verify panic; whatever it accepts was
// signed with the secret for that body at a time within MaxAge of now; and
// what Sign makes, Verify accepts.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"id":"d1"}`)
	f.Add("whsec", verify.Sign("whsec", sentAt, body), body, int64(0))
	f.Add("whsec", verify.Sign("whsec", sentAt, body)+",v1=00", body, int64(301))
	f.Add("", "t=1,v1="+strings.Repeat("0", 64), []byte{}, int64(-5))
	f.Add("k", "t=,v1=", []byte("x"), int64(1))
	f.Fuzz(func(t *testing.T, secret, header string, body []byte, skew int64) {
		now := sentAt.Add(time.Duration(skew%1_000_000) * time.Second)
		if err := verify.Verify(secret, header, body, now); err == nil {
			unix := int64(-1)
			for _, part := range strings.Split(header, ",") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(part), "t="); ok {
					unix, _ = strconv.ParseInt(v, 10, 64)
				}
			}
			require.NotEqual(t, int64(-1), unix, "accepted without a time: %q", header)
			age := now.Unix() - unix
			require.LessOrEqual(t, age, int64(verify.MaxAge/time.Second))
			require.GreaterOrEqual(t, age, -int64(verify.MaxAge/time.Second))
			want := strings.SplitN(verify.Sign(secret, time.Unix(unix, 0), body), "v1=", 2)[1]
			require.Contains(t, strings.ToLower(header), "v1="+want, "accepted a signature it did not make")
		}
		signed := verify.Sign(secret, now, body)
		require.NoError(t, verify.Verify(secret, signed, body, now))
	})
}
