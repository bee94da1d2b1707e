package ratelimit

import (
	"context"
	_ "embed"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/redis/rueidis"
)

// The scripts are composed when the package loads from pieces that each
// hold one idea (see lua/): the call's time (now.lua), the exact log
// (window.lua), the approximate counter (counter.lua), the GCRA bucket
// (gcra.lua), the calendar quota (quota.lua), what undo and the write-back
// change in those two outside a decision (adjust.lua), the penalty ladder
// (strikes.lua) and the one decision of a (rule, key) pair over any of them
// (decide.lua), followed by an entry piece that reads the script's keys and
// arguments.
var (
	//go:embed lua/now.lua
	nowLua string
	//go:embed lua/window.lua
	windowLua string
	//go:embed lua/counter.lua
	counterLua string
	//go:embed lua/strikes.lua
	strikesLua string
	//go:embed lua/decide.lua
	decideLua string
	//go:embed lua/allow.lua
	allowLua string
	//go:embed lua/gcra.lua
	gcraLua string
	//go:embed lua/quota.lua
	quotaLua string
	//go:embed lua/adjust.lua
	adjustLua string
	//go:embed lua/group.lua
	groupLua string
	//go:embed lua/ban.lua
	banLua string
	//go:embed lua/undo.lua
	undoLua string
	//go:embed lua/writeback.lua
	writeBackLua string
	//go:embed lua/fleet.lua
	fleetLua string
)

// A rule without penalty runs a script without the ladder: every piece a
// script holds costs Redis time on every call, defined or not.
var (
	allowScript         = newScript(nowLua + windowLua + decideLua + allowLua)
	penaltyScript       = newScript(nowLua + windowLua + strikesLua + decideLua + allowLua)
	approxScript        = newScript(nowLua + counterLua + decideLua + allowLua)
	approxPenaltyScript = newScript(nowLua + counterLua + strikesLua + decideLua + allowLua)
	gcraScript          = newScript(nowLua + gcraLua + decideLua + allowLua)
	gcraPenaltyScript   = newScript(nowLua + gcraLua + strikesLua + decideLua + allowLua)
	quotaScript         = newScript(nowLua + quotaLua + decideLua + allowLua)
	quotaPenaltyScript  = newScript(nowLua + quotaLua + strikesLua + decideLua + allowLua)
	groupScript         = newScript(nowLua + windowLua + strikesLua + decideLua + groupLua)
	groupKindsScript    = newScript(nowLua + windowLua + gcraLua + quotaLua + strikesLua + decideLua + groupLua)
	banScript           = newScript(nowLua + banLua)
	undoScript          = newScript(gcraLua + quotaLua + adjustLua + undoLua)
	// writeBackScript writes back what was decided without Redis (see
	// writeback.go); it records log events as allow.lua does, and adds to
	// GCRA buckets and quotas through their own pieces (adjust.lua).
	writeBackScript = newScript(windowLua + gcraLua + quotaLua + adjustLua + writeBackLua)
	fleetScript     = newScript(nowLua + fleetLua)
)

// keyKind is the letter that ends the Redis key of a plan's events: 'l'
// for an exact log, 'c' for an approximate counter, 'g' for a GCRA bucket,
// 'q' for a calendar quota (see redisKeys).
func (p *plan) keyKind() byte {
	switch {
	case p.kind == GCRA:
		return 'g'
	case p.kind == CalendarQuota:
		return 'q'
	case p.approx:
		return 'c'
	}
	return 'l'
}

// scriptArgs returns what allow.lua takes of a plan as ARGV[2] and ARGV[5]
// beside rate and n: a log's or counter's window and member id, a
// bucket's wq and rq, a quota period's start and end. For a log the member
// is not a number: ok is false.
func (p *plan) scriptArgs() (second, fifth int64, ok bool) {
	switch p.kind {
	case GCRA:
		return p.wq, p.rq, true
	case CalendarQuota:
		return p.start, p.end, true
	}
	return p.window, 0, false
}

// script is a Lua script sent with EVALSHA, and with EVAL when the server
// does not have it (first use, SCRIPT FLUSH, a restart). Unlike
// rueidis.Lua.Exec it takes its keys and arguments in arrays the caller
// keeps on its stack, so a call allocates nothing for them. EVALSHA is a
// write, so rueidis never retries it: a lost reply cannot double-count.
//
// The script's name, its SHA-1 digest, is learned from Redis (SCRIPT LOAD
// returns it) the first time the script is run, never computed here: a
// FIPS 140-only build (GODEBUG=fips140=only) forbids SHA-1 in process, and a
// limiter that never talks to Redis never needs the name at all.
type script struct {
	src string
	sha atomic.Pointer[string] // nil until SCRIPT LOAD has named it
}

func newScript(src string) *script { return &script{src: src} }

func (s *script) exec(ctx context.Context, c rueidis.Client, keys []string, args []string) rueidis.RedisResult {
	sha := s.sha.Load()
	if sha == nil {
		resp := c.Do(ctx, c.B().ScriptLoad().Script(s.src).Build())
		name, err := resp.ToString()
		if err != nil {
			return resp // the pipeline classifies the failure
		}
		s.sha.Store(&name)
		sha = &name
	}
	resp := c.Do(ctx, c.B().Evalsha().Sha1(*sha).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	if err, ok := rueidis.IsRedisErr(resp.Error()); ok && err.IsNoScript() {
		resp = c.Do(ctx, c.B().Eval().Script(s.src).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build())
	}
	return resp
}

// decision is what either path decided, in microseconds.
type decision struct {
	allowed    bool
	warned     bool
	banned     bool
	count      int64 // events in the window after the call
	retry      int64 // µs until the same call could pass
	reset      int64 // µs until the window is empty
	violations int64 // remembered for the key
	banLeft    int64 // µs until the ban ends
	memoryLeft int64 // µs until the violations are forgotten
	bans       int64 // bans remembered with the violations
	win        int64 // approximate counter: the fixed window events went into (Redis path only)
}

// encodeCall writes the Redis keys of k (its log, or its counter for an
// approximate rule, and its penalty state) and the script arguments of one
// call into one string and slices it into keys and args, so that a call
// costs one allocation for all of them. It returns args cut to the script's
// arity.
func encodeCall(keys *[2]string, args *[11]string, prefix string, k lkey, p *plan, now int64, useNow bool, n int64, id string, seq uint64) []string {
	one := keyLen(prefix, k)
	var b strings.Builder
	b.Grow(2*one + len(id) + 11*24)
	writeKey(&b, prefix, k, p.keyKind())
	writeKey(&b, prefix, k, 'p')
	var ends [11]int
	var num [24]byte
	if useNow {
		b.Write(strconv.AppendInt(num[:0], now, 10))
	}
	ends[0] = b.Len()
	second, fifth, numeric := p.scriptArgs()
	b.Write(strconv.AppendInt(num[:0], second, 10))
	ends[1] = b.Len()
	b.Write(strconv.AppendInt(num[:0], p.rate, 10))
	ends[2] = b.Len()
	b.Write(strconv.AppendInt(num[:0], n, 10))
	ends[3] = b.Len()
	if numeric {
		b.Write(strconv.AppendInt(num[:0], fifth, 10))
	} else {
		b.WriteString(id)
		b.Write(strconv.AppendUint(num[:0], seq, 10))
	}
	ends[4] = b.Len()
	count := 5
	if p.penalize {
		for i, v := range [4]int64{p.penalty.warnAfter, p.penalty.banAfter, p.penalty.banFor, p.penalty.memory} {
			b.Write(strconv.AppendInt(num[:0], v, 10))
			ends[5+i] = b.Len()
		}
		b.Write(strconv.AppendFloat(num[:0], p.penalty.growth, 'g', -1, 64))
		ends[9] = b.Len()
		b.Write(strconv.AppendInt(num[:0], p.penalty.maxBan, 10))
		ends[10] = b.Len()
		count = 11
	}
	s := b.String()
	keys[0], keys[1] = s[:one], s[one:2*one]
	start := 2 * one
	for i := 0; i < count; i++ {
		args[i] = s[start:ends[i]]
		start = ends[i]
	}
	return args[:count]
}

// parseReply reads a decision's reply to a call of plan p: decide.lua's
// nine numbers, or for a rule without penalty the first four (allow.lua
// leaves out the five that are then 0), and for an approximate rule
// allow.lua's one more, the window its events went into.
func parseReply(resp rueidis.RedisResult, p *plan) (decision, error) {
	arr, err := resp.ToArray()
	if err != nil {
		return decision{}, err
	}
	width := 4
	if p.penalize {
		width = 9
	}
	if len(arr) != width+b2i(p.approx) {
		return decision{}, errors.New("unexpected script reply")
	}
	d, err := parseDecision(arr[:width])
	if err == nil && p.approx {
		d.win, err = arr[width].AsInt64()
	}
	return d, err
}

// itoa formats a script argument.
func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// flag formats a boolean script argument: "1" or "0".
func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseDecision reads one decision's nine numbers, or its first four: the
// numbers of the penalty it leaves out are 0.
func parseDecision(arr []rueidis.RedisMessage) (decision, error) {
	var v [9]int64
	for i := range arr {
		var err error
		if v[i], err = arr[i].AsInt64(); err != nil {
			return decision{}, err
		}
	}
	return decision{
		allowed:    v[0] == 1,
		count:      v[1],
		retry:      v[2],
		reset:      v[3],
		violations: v[4],
		warned:     v[5]&1 != 0,
		banned:     v[5]&2 != 0,
		banLeft:    v[6],
		memoryLeft: v[7],
		bans:       v[8],
	}, nil
}

// failure says how a failed Redis call counts.
type failure int

const (
	// outage: Redis cannot serve now (network error, timeout, LOADING, ...);
	// the breaker counts it and the call is decided locally.
	outage failure = iota
	// misuse: Redis answered with an error that retrying will not cure
	// (WRONGTYPE, a script error); the caller gets it, the breaker counts
	// it as an answer.
	misuse
	// callerGone: the caller's own context ended; neither Redis' fault nor
	// the breaker's business.
	callerGone
)

// callError is a failed Redis call and how it counts.
type callError struct {
	kind failure
	err  error
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// unavailableCodes are error replies that mean the server cannot serve now
// rather than that the request was wrong.
var unavailableCodes = []string{
	"LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"OOM", "MISCONF", "NOREPLICAS", "NOAUTH", "NOPERM", "WRONGPASS",
}

// authCodes are the outages that mean misconfiguration: logged as errors.
var authCodes = []string{"NOAUTH", "NOPERM", "WRONGPASS"}

func replyCode(msg string) string {
	if i := strings.IndexByte(msg, ' '); i >= 0 {
		return msg[:i]
	}
	return msg
}

func hasCode(codes []string, code string) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// classify says how err, from a call made under the caller's ctx, counts.
func classify(ctx context.Context, err error) *callError {
	if ctx.Err() != nil {
		return &callError{kind: callerGone, err: ctx.Err()}
	}
	if re, ok := rueidis.IsRedisErr(err); ok && !hasCode(unavailableCodes, replyCode(re.Error())) {
		return &callError{kind: misuse, err: err}
	}
	return &callError{kind: outage, err: err}
}

// isAuthFailure reports whether err is an error reply that means the client
// is not allowed in: a misconfiguration that must be loud.
func isAuthFailure(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && hasCode(authCodes, replyCode(re.Error()))
}
