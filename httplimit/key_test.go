package httplimit_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/ratelimit-go/ratelimit/httplimit"
)

func TestKeys(t *testing.T) {
	user := httplimit.User(func(r *http.Request) (string, bool) { return r.URL.Query().Get("u"), r.URL.Query().Has("u") })
	for _, c := range []struct {
		name   string
		key    httplimit.KeyFunc
		target string
		header []string
		want   string // "" for ErrNoKey
	}{
		{"global", httplimit.Global(), "/", nil, "global"},
		{"user", user, "/?u=42", nil, "user:42"},
		{"anonymous", user, "/", nil, ""},
		{"empty user", user, "/?u=", nil, ""},
		{"header", httplimit.Header("x-api-key"), "/", []string{"X-Api-Key", "k1"}, "header:X-Api-Key:k1"},
		{"first header value", httplimit.Header("X-Api-Key"), "/", []string{"X-Api-Key", "k1", "X-Api-Key", "k2"}, "header:X-Api-Key:k1"},
		{"no header", httplimit.Header("X-Api-Key"), "/", nil, ""},
		{"empty header", httplimit.Header("X-Api-Key"), "/", []string{"X-Api-Key", ""}, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, c.target, nil)
		for i := 0; i+1 < len(c.header); i += 2 {
			r.Header.Add(c.header[i], c.header[i+1])
		}
		got, err := c.key(r)
		switch {
		case c.want == "" && !errors.Is(err, httplimit.ErrNoKey):
			t.Errorf("%s: %q, %v; want ErrNoKey", c.name, got, err)
		case c.want != "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
		}
	}
}
