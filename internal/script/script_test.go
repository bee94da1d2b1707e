package script

import (
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/rueidis"
)

// pieces are two kinds' pieces and an entry that composes them.
var pieces = MustParse(fstest.MapFS{
	"a.lua": {Data: []byte(`-- a header, never in a script
{{- define "one.count"}}count = 1{{end}}
{{- define "two.count"}}count = 2{{end}}
{{- define "two.tail"}}, 'tail'{{end}}`)},
	"entry.lua": {Data: []byte(`{{- define "entry" -}}
local count

{{kind "count" .}}
if count > 0 then
{{- if .Penalty}}
    count = count + 10
{{- end}}
        return {count{{if has "tail" .}}{{kind "tail" .}}{{end}}}
end
{{- end}}`)},
}, "*.lua")

func TestCompose(t *testing.T) {
	for _, c := range []struct {
		v    Variant
		want string
	}{
		{Variant{Kind: "one"}, "local count\ncount = 1\nif count > 0 then\n  return {count}\nend\n"},
		{Variant{Kind: "two", Penalty: true}, "local count\ncount = 2\nif count > 0 then\n  count = count + 10\n  return {count, 'tail'}\nend\n"},
	} {
		if got := pieces.Compose("entry", c.v); got != c.want {
			t.Errorf("Compose(entry, %+v) =\n%s\nwant\n%s", c.v, got, c.want)
		}
	}
}

func TestComposeUnknownPiecePanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "three.count") {
			t.Fatalf("recovered %v, want a panic that names the missing piece", r)
		}
	}()
	pieces.Compose("entry", Variant{Kind: "three"})
}

// TestExecWithoutFirstLine: miniredis, like Redis before 7, rejects the
// "#!lua" line; the Client learns it once and sends the plain text from
// then on, by name once the server has run it.
func TestExecWithoutFirstLine(t *testing.T) {
	mr := miniredis.RunT(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	c := &Client{Client: rc}
	s := New(AddsState, "return redis.call('INCR', KEYS[1]) + tonumber(ARGV[1])")
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		n, err := s.Exec(ctx, c, []string{"k"}, []string{"100"}).AsInt64()
		if err != nil || n != 100+i {
			t.Fatalf("call %d = %d, %v; want %d", i, n, err, 100+i)
		}
	}
	if !c.PlainOnly.Load() {
		t.Error("the client did not learn that its server takes no first line")
	}
	if s.sha[plainText].Load() == nil {
		t.Error("the script was not named after the server ran it")
	}
	// A SCRIPT FLUSH: the name is unknown again, the text is sent whole.
	if err := rc.Do(ctx, rc.B().ScriptFlush().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.Exec(ctx, c, []string{"k"}, []string{"0"}).AsInt64(); err != nil || n != 4 {
		t.Fatalf("after SCRIPT FLUSH = %d, %v; want 4", n, err)
	}
}

// TestExecError: a script's own error comes back as the server's, and the
// client still takes first lines.
func TestExecError(t *testing.T) {
	mr := miniredis.RunT(t)
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{mr.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	s := New(RemovesOnly, "return redis.error_reply('nope')")
	err = s.Exec(context.Background(), rc, nil, nil).Error()
	if re, ok := rueidis.IsRedisErr(err); !ok || !strings.Contains(re.Error(), "nope") {
		t.Fatalf("error = %v, want the script's", err)
	}
}
