package redistest

import (
	"bufio"
	"errors"
	"strings"
	"testing"
)

func TestEncodeCommand(t *testing.T) {
	got := string(encodeCommand([]string{"SET", "k", ""}))
	want := "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n"
	if got != want {
		t.Fatalf("encodeCommand = %q, want %q", got, want)
	}
}

func TestReadReplyRendering(t *testing.T) {
	cases := []struct {
		in   string
		want string
	}{
		{"+OK\r\n", "OK"},
		{":-42\r\n", "-42"},
		{"$5\r\nhe\r\nl\r\n", "he\r\nl"},
		{"$0\r\n\r\n", ""},
		{"*3\r\n$1\r\na\r\n:2\r\n*2\r\n+b\r\n$-1\r\n", "a\n2\nb\n"},
		{"*0\r\n", ""},
	}
	for _, c := range cases {
		v, err := readReply(bufio.NewReader(strings.NewReader(c.in)))
		if err != nil {
			t.Errorf("readReply(%q): %v", c.in, err)
			continue
		}
		if got := render(v); got != c.want {
			t.Errorf("render(readReply(%q)) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestReadReplyErrorsAndNulls(t *testing.T) {
	_, err := readReply(bufio.NewReader(strings.NewReader("-MOVED 1 127.0.0.1:1\r\n")))
	var re *RedisError
	if !errors.As(err, &re) || re.Msg != "MOVED 1 127.0.0.1:1" {
		t.Fatalf("error reply: got %v, want *RedisError with the message", err)
	}
	for _, in := range []string{"$-1\r\n", "*-1\r\n"} {
		v, err := readReply(bufio.NewReader(strings.NewReader(in)))
		if err != nil || v != nil {
			t.Errorf("readReply(%q) = %v, %v; want nil, nil", in, v, err)
		}
	}
	for _, in := range []string{"?x\r\n", "+OK\n", "$3\r\nab", ":x\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(in))); err == nil {
			t.Errorf("readReply(%q) succeeded, want an error", in)
		}
	}
}
