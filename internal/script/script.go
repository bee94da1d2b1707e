package script

import (
	"context"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// The first lines a script is sent with to a server that takes them
// (Redis 7 and later): a script that adds state is checked by Redis before
// it runs, and refused whole with OOM at maxmemory (under noeviction), so
// that it never writes past it. Without that line Redis checks only a
// script's first write, and a script that trims before it adds would grow
// Redis on every call. A script that only removes state runs at maxmemory
// too (allow-oom), so that an operator can free memory.
const (
	AddsState   = "#!lua\n"
	RemovesOnly = "#!lua flags=allow-oom\n"
)

// The two texts of a script: as composed (for servers that reject the
// first line, Redis before 7 and miniredis), and with its first line.
const (
	plainText = iota
	flaggedText
)

// Script is a Lua script sent with EVALSHA, and with EVAL when the server
// does not have it (first use, SCRIPT FLUSH, a restart). Unlike
// rueidis.Lua.Exec it takes its keys and arguments in slices the caller
// may keep on its stack, so a call allocates nothing for them. EVALSHA is
// a write, so rueidis never retries it: a lost reply cannot double-count.
//
// A script is sent with its first line (AddsState or RemovesOnly) until
// the server rejects that line as a syntax error: the Client then
// remembers that its server takes none, and sends the composed text from
// then on. That costs one more round trip, once per client, and only on a
// server that takes no first line.
//
// A script's name, its SHA-1 digest, is learned from Redis (SCRIPT LOAD
// returns it) once the script has run, never computed here: a FIPS
// 140-only build (GODEBUG=fips140=only) forbids SHA-1 in process, and a
// program that never talks to Redis never needs the name at all. Until
// then the script is sent with EVAL, which Redis refuses at maxmemory
// before it caches the text: a server that is out of memory gains nothing
// from a script it refuses, however often it is sent (SCRIPT LOAD, which
// Redis never refuses, is sent only for a text the server has just run
// and cached). A Script is safe for concurrent use.
type Script struct {
	src [2]string                 // plainText, flaggedText
	sha [2]atomic.Pointer[string] // nil until SCRIPT LOAD has named the text
}

// New returns the script src, sent with the first line first (AddsState
// or RemovesOnly) to servers that take it.
func New(first, src string) *Script { return &Script{src: [2]string{src, first + src}} }

// Client is the client of one Redis (or one Cluster) and what it learned
// of the server's scripts. It is safe for concurrent use.
type Client struct {
	rueidis.Client
	PlainOnly atomic.Bool // the server rejected a script's first line
}

// Exec runs the script on c with keys and args: with its first line,
// unless c (a *Client) learned that its server takes none.
func (s *Script) Exec(ctx context.Context, c rueidis.Client, keys []string, args []string) rueidis.RedisResult {
	sc, _ := c.(*Client)
	if sc != nil && sc.PlainOnly.Load() {
		return s.run(ctx, c, plainText, keys, args)
	}
	resp := s.run(ctx, c, flaggedText, keys, args)
	if rejectsFirstLine(resp.Error()) {
		if sc != nil {
			sc.PlainOnly.Store(true)
		}
		resp = s.run(ctx, c, plainText, keys, args)
	}
	return resp
}

// run sends the script's text v by its name when known, and otherwise (or
// when the server does not have it) whole; once the server has run the
// whole text, it learns the name.
func (s *Script) run(ctx context.Context, c rueidis.Client, v int, keys []string, args []string) rueidis.RedisResult {
	sha := s.sha[v].Load()
	if sha != nil {
		resp := c.Do(ctx, c.B().Evalsha().Sha1(*sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
		if err, ok := rueidis.IsRedisErr(resp.Error()); !ok || !err.IsNoScript() {
			return resp
		}
	}
	resp := c.Do(ctx, c.B().Eval().Script(s.src[v]).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if sha == nil && resp.Error() == nil {
		// The server has cached the text: loading it adds nothing (on a
		// Cluster SCRIPT LOAD may reach another node, once per text).
		if name, err := c.Do(ctx, c.B().ScriptLoad().Script(s.src[v]).Build()).ToString(); err == nil {
			s.sha[v].Store(&name)
		}
	}
	return resp
}

// rejectsFirstLine reports whether err is a server's syntax error at a
// script's first line ('#'), which servers before Redis 7 and miniredis
// answer to "#!lua".
func rejectsFirstLine(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.Contains(re.Error(), "near '#'")
}
