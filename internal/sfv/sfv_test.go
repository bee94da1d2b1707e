package sfv

import (
	"testing"
	"time"
)

func TestAppendString(t *testing.T) {
	for in, want := range map[string]string{
		"coupon":        `"coupon"`,
		`a"b\c`:         `"a\"b\\c"`,
		"50%":           `"50%25"`,
		"ünïcode\x00\n": `"%C3%BCn%C3%AFcode%00%0A"`,
		"":              `""`,
	} {
		if got := string(AppendString(nil, in)); got != want {
			t.Errorf("AppendString(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestCeilSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int64{
		0: 0, -time.Second: 0, time.Nanosecond: 1, time.Second: 1,
		time.Second + time.Nanosecond: 2, 59*time.Second + 999*time.Millisecond: 60,
	} {
		if got := CeilSeconds(d); got != want {
			t.Errorf("CeilSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}
