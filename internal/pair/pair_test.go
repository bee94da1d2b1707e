package pair

import (
	"strings"
	"testing"
)

func TestNameSet(t *testing.T) {
	var n Name
	if n.Set("r", "") {
		t.Error("an empty key was named")
	}
	kept := strings.Repeat("k", MaxKeyLength)
	if !n.Set("r", kept) || n.Key != kept || n.Hashed || n.Rule != "r" {
		t.Errorf("a key of MaxKeyLength is named %+v, want it kept as it is", n)
	}
	n.Group = "g"
	if !n.Set("r", kept+"x") || len(n.Key) != 64 || !n.Hashed || n.Group != "" {
		t.Errorf("a longer key is named %+v, want its SHA-256 in hex, marked, outside any group", n)
	}
}

// TestKeyLenIsWhatWriteKeyWrites: every key of a name, whatever its
// escapes, group and digest, is exactly KeyLen long (the encoders size
// their buffers with it).
func TestKeyLenIsWhatWriteKeyWrites(t *testing.T) {
	for _, n := range []Name{
		{Rule: "r", Key: "k"},
		{Rule: "a%b}", Key: "{}%"},
		{Rule: strings.Repeat("r", 12), Key: "k", Group: "g%}"},
		{Rule: "r", Key: strings.Repeat("f", 64), Hashed: true, Group: strings.Repeat("g", 10)},
	} {
		ks := RedisKeys("app:", n, "ab")
		for _, k := range append(ks.Meters, ks.Penalty, ks.Reset) {
			if len(k) != KeyLen("app:", n) {
				t.Errorf("%+v: key %q is %d long, KeyLen says %d", n, k, len(k), KeyLen("app:", n))
			}
		}
		if ks.Meter('b') != ks.Meters[1] || !strings.HasSuffix(ks.Meter('b'), ":b") {
			t.Errorf("%+v: the meter of 'b' is %q among %q", n, ks.Meter('b'), ks.Meters)
		}
		if id := IDKey("app:", n, 'w', "ID"); id != ks.Penalty[:len(ks.Penalty)-1]+"w:ID" {
			t.Errorf("%+v: id key %q beside %q", n, id, ks.Penalty)
		}
	}
	if got := FleetKey("app:"); got != "app:v1:{instances}" {
		t.Errorf("fleet key %q", got)
	}
}

func TestDecimalLen(t *testing.T) {
	for n, want := range map[int64]int{0: 1, 9: 1, 10: 2, 99: 2, 100: 3, 1795344143891600: 16, 1<<63 - 1: 19} {
		if got := DecimalLen(n); got != want {
			t.Errorf("DecimalLen(%d) = %d, want %d", n, got, want)
		}
	}
}
