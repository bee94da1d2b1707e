package ratelimit

import (
	"context"
	"embed"
	"errors"
	"strconv"
	"strings"

	"github.com/ratelimit-go/ratelimit/internal/ladder"
	"github.com/ratelimit-go/ratelimit/internal/pair"
	"github.com/ratelimit-go/ratelimit/internal/script"
	"github.com/redis/rueidis"
)

// The scripts are composed when the package loads, from pieces that each
// hold one idea (lua/; internal/script says how they compose): the call's
// time (now.lua), a key's expiry (ttl.lua), each kind of meter (its own
// file, as sliding.lua), the penalty ladder (penalty.lua) and one pair's
// decision over any of them (decide.lua); and the entries that read a
// script's keys and arguments (allow.lua, group.lua, ban.lua, undo.lua,
// writeback.lua, fleet.lua, reset.lua, renew.lua).
//
// The clock (a time in ARGV[1], or Redis' TIME) is left to run time: it
// costs a string comparison and a test or two per call, while a variant
// per clock would double the scripts a server caches and every client
// loads.
var (
	//go:embed lua/*.lua
	luaFiles  embed.FS
	luaPieces = script.MustParse(luaFiles, "lua/*.lua")
)

// compose returns the script text of entry for v (see script.Pieces).
func compose(entry string, v script.Variant) string { return luaPieces.Compose(entry, v) }

// allowVariant is allow.lua's variant for a rule of kind, with or without
// a penalty.
func allowVariant(kind string, penalty bool) script.Variant {
	return script.Variant{Kind: kind, Penalty: penalty, Second: "ARGV[2]", Fifth: "ARGV[5]", PenaltyAt: "7"}
}

// reserveVariant is allow.lua's variant for a Reserve of a rule of kind,
// with or without a penalty: it keeps a record of what it took.
func reserveVariant(kind string, penalty bool) script.Variant {
	v := allowVariant(kind, penalty)
	v.Reserve = true
	return v
}

// kindScripts are the entries composed with one kind's pieces: each kind's
// file holds its own (see redisKind.scripts).
type kindScripts struct {
	pieces    string            // the name of the kind's pieces in lua/
	allow     [2]*script.Script // allow.lua, without and with a penalty
	reserve   [2]*script.Script // allow.lua's Reserve variant, likewise (see reserve.go)
	undo      *script.Script    // undo.lua
	writeBack *script.Script    // writeback.lua
	grant     *script.Script    // grant.lua (see prefetch.go); nil for a kind without its pieces
}

// composeKind returns the entries composed for a rule of kind (the name of
// its pieces in lua/, as sliding.lua's "sliding").
func composeKind(kind string) *kindScripts {
	return &kindScripts{
		pieces: kind,
		allow: [2]*script.Script{
			script.New(script.AddsState, compose("allow", allowVariant(kind, false))),
			script.New(script.AddsState, compose("allow", allowVariant(kind, true))),
		},
		reserve: [2]*script.Script{
			script.New(script.AddsState, compose("allow", reserveVariant(kind, false))),
			script.New(script.AddsState, compose("allow", reserveVariant(kind, true))),
		},
		undo: script.New(script.RemovesOnly, compose("undo", script.Variant{Kind: kind})),
		// The write-back records log events as allow.lua does, and adds
		// to the other meters through their own pieces.
		writeBack: script.New(script.AddsState, compose("writeback", script.Variant{Kind: kind})),
		grant:     composeGrant(kind),
	}
}

// A rule without penalty runs a script without the ladder: every piece a
// script holds costs Redis time on every call.
//
// Every script but undo's and reset's adds state, and Redis must refuse it
// at maxmemory before it writes anything (see script.Script); those two only
// remove, and must run whatever Redis' memory.
var (
	banScript   = script.New(script.AddsState, compose("ban", script.Variant{}))
	fleetScript = script.New(script.AddsState, compose("fleet", script.Variant{}))
	// resetScript frees a pair's state, and leaves only the Reset's time,
	// a few bytes: it runs at maxmemory too, so an operator can free
	// memory.
	resetScript = script.New(script.RemovesOnly, compose("reset", script.Variant{}))
	// renewScript renews a lease (see lease.go).
	renewScript = script.New(script.AddsState, compose("renew", script.Variant{}))
)

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
	// given says Redis' count is one a give-back took from (a quota's,
	// a fixed window's or a bucket's mark, see lua/decide.lua): it holds
	// every process' give-backs, and the process' own count may not.
	given bool
}

// callArgs is the most arguments allow.lua takes before the leases.
const callArgs = 8

// writeLadder writes a penalty's numbers that only a call climbing its
// ladder reads (penalty.lua's penalty.ladder): warn_after, ban_after,
// ban_for, growth and max_ban, joined by ':', one argument instead of five
// (memory, which every decision reads, goes on its own before it).
func writeLadder(b *strings.Builder, pp *ladder.Plan) {
	var num [24]byte
	for _, v := range [3]int64{pp.WarnAfter, pp.BanAfter, pp.BanFor} {
		b.Write(strconv.AppendInt(num[:0], v, 10))
		b.WriteByte(':')
	}
	b.Write(strconv.AppendFloat(num[:0], pp.Growth, 'g', -1, 64))
	b.WriteByte(':')
	b.Write(strconv.AppendInt(num[:0], pp.MaxBan, 10))
}

// writeHeld writes what the process' own count adds to a call (allow.lua's
// ARGV[6]): "0" when it adds nothing, as for most calls (writeTailArgs
// then leaves it out when no argument follows it), and otherwise
// retry, owed, ban left and since, joined by ':', and after them the
// violations it delivers and the time of their last when it delivers any
// (see held.strikes). One argument instead of four or six: each argument
// sent costs Redis ~1.3k instructions (callgrind).
func writeHeld(b *strings.Builder, hd *held) {
	if hd.none() {
		b.WriteByte('0')
		return
	}
	var num [24]byte
	nums := [6]int64{hd.retry, hd.owed, hd.banLeft, hd.since, hd.strikes, hd.struck}
	if hd.strikes == 0 {
		nums[4] = -1 // the last two only when the call delivers violations
	}
	for i, v := range nums {
		if v < 0 && i >= 4 {
			break
		}
		if i > 0 {
			b.WriteByte(':')
		}
		b.Write(strconv.AppendInt(num[:0], v, 10))
	}
}

// none reports whether the process' own count adds nothing to a call
// (writeHeld writes "0").
func (hd *held) none() bool {
	return hd.retry == 0 && hd.owed == 0 && hd.banLeft == 0 && hd.strikes == 0
}

// encodeCall writes the Redis keys of k (its log, or its counter for an
// approximate rule, and its penalty state) and the script arguments of one
// call into one string and slices it into keys and args, so that a call
// costs one allocation for all of them. Only a rule with a penalty sends
// the penalty state's key, and hd is what the process' own count adds (see
// mirror.go): only when it holds the call back does the script get the
// third key, the pair's last Reset, and the second before it (a
// concurrency rule's always gets them: the third is the pair's mark, see
// lua/concurrency.lua); it leaves ARGV[6] out when it would be "0" with
// nothing after it (no penalty, no leases). leases
// are an Acquire's: the leases of the pair the process holds on Redis,
// sent after the other arguments (see leaseSet.onRedis). It returns keys
// and args cut to the script's arity.
func encodeCall(keys *[3]string, args *[callArgs]string, prefix string, k lkey, p *plan, now int64, useNow bool, n int64, id string, seq uint64, hd *held, leases []string) ([]string, []string) {
	one := pair.KeyLen(prefix, k)
	nk := callKeys(p, hd)
	second, fifth, byMember := p.alg.redis.args(*p)
	// The string's exact size for most calls (an upper bound for the
	// rest), so that it is allocated once, in the smallest size class
	// that holds it: Grow with a generous guess took 256 bytes a call.
	size := nk*one + pair.DecimalLen(second) + pair.DecimalLen(p.rate) + pair.DecimalLen(n) + 1
	if useNow {
		size += pair.DecimalLen(now)
	}
	if byMember {
		size += len(id) + len(strconv.AppendUint(make([]byte, 0, 20), seq, 10))
	} else {
		size += pair.DecimalLen(fifth)
	}
	if !hd.none() {
		size += 6 * 21
	}
	if p.penalize {
		size += penaltyLen(&p.penalty)
	}
	var b strings.Builder
	b.Grow(size)
	writeCallKeys(&b, prefix, &k, p, nk)
	var ends [callArgs]int
	var num [24]byte
	if useNow {
		b.Write(strconv.AppendInt(num[:0], now, 10))
	}
	ends[0] = b.Len()
	b.Write(strconv.AppendInt(num[:0], second, 10))
	ends[1] = b.Len()
	b.Write(strconv.AppendInt(num[:0], p.rate, 10))
	ends[2] = b.Len()
	b.Write(strconv.AppendInt(num[:0], n, 10))
	ends[3] = b.Len()
	if !byMember {
		b.Write(strconv.AppendInt(num[:0], fifth, 10))
	} else {
		b.WriteString(id)
		b.Write(strconv.AppendUint(num[:0], seq, 10))
	}
	ends[4] = b.Len()
	count := writeTailArgs(&b, &ends, p, hd, nk)
	return cutCall(b.String(), keys, args, nk, one, &ends, count, leases)
}

// callKeys is how many keys encodeCall sends for a call under p that hd
// holds: the meter's, then the penalty state's for a rule with a penalty,
// then the pair's last Reset (or a concurrency rule's mark) when the
// process' own count holds the call back, or for a concurrency rule.
func callKeys(p *plan, hd *held) int {
	switch {
	case hd.holds() || p.alg.rules.leased():
		return 3
	case p.penalize:
		return 2
	}
	return 1 // a rule without penalty needs no KEYS[2]: each key sent costs Redis ~2.9k instructions
}

// penaltyLen is the length of a penalty's arguments as encodeCall writes
// them: memory, and the ladder (see writeLadder).
func penaltyLen(pp *ladder.Plan) int {
	var num [32]byte
	return pair.DecimalLen(pp.Memory) + pair.DecimalLen(pp.WarnAfter) + pair.DecimalLen(pp.BanAfter) + pair.DecimalLen(pp.BanFor) +
		len(strconv.AppendFloat(num[:0], pp.Growth, 'g', -1, 64)) + pair.DecimalLen(pp.MaxBan) + 4
}

// writeCallKeys writes the first nk of a call's keys of k (see callKeys):
// its meter's, under the kind's letter, its penalty state's and its last
// Reset's.
func writeCallKeys(b *strings.Builder, prefix string, k *lkey, p *plan, nk int) {
	pair.WriteKey(b, prefix, *k, p.alg.redis.letter())
	if nk >= 2 {
		pair.WriteKey(b, prefix, *k, 'p')
	}
	if nk == 3 {
		pair.WriteKey(b, prefix, *k, 'r')
	}
}

// writeTailArgs writes a call's arguments after the fifth, when it has
// any, and where each ends into ends: what the process' own count adds
// (hd, see writeHeld), and a penalty's memory and ladder. It returns how
// many arguments the call has.
func writeTailArgs(b *strings.Builder, ends *[callArgs]int, p *plan, hd *held, nk int) int {
	count := 5
	if !hd.none() || p.penalize || nk == 3 {
		// Left out when it is "0" and nothing follows it (a rule
		// without penalty or leases): each argument sent costs Redis
		// ~1.3k instructions.
		writeHeld(b, hd)
		ends[5] = b.Len()
		count = 6
	}
	if p.penalize {
		var num [24]byte
		b.Write(strconv.AppendInt(num[:0], p.penalty.Memory, 10))
		ends[6] = b.Len()
		writeLadder(b, &p.penalty)
		ends[7] = b.Len()
		count = callArgs
	}
	return count
}

// cutCall slices s, a call's nk keys of one bytes each and then its count
// arguments, each ending at its ends, into keys and args, and returns
// them cut to the script's arity, with an Acquire's leases after the
// arguments.
func cutCall(s string, keys *[3]string, args *[callArgs]string, nk, one int, ends *[callArgs]int, count int, leases []string) ([]string, []string) {
	for i := range nk {
		keys[i] = s[i*one : (i+1)*one]
	}
	start := nk * one
	for i := 0; i < count; i++ {
		args[i] = s[start:ends[i]]
		start = ends[i]
	}
	if len(leases) > 0 {
		return keys[:nk], append(args[:count:count], leases...)
	}
	return keys[:nk], args[:count]
}

// parseReply reads a decision's reply to a call of plan p: decide.lua's
// nine numbers, or the first four (allow.lua leaves out the five when they
// are 0, as they always are for a rule without penalty), and for an
// approximate rule allow.lua's one more, the window its events went into;
// or, for an allowing call of a kind with a short reply (shortReplier),
// its count alone (see allow.lua); now is the call's time. An integer
// reply costs no allocation; an array one, its messages.
func parseReply(resp rueidis.RedisResult, p *plan, now int64) (decision, error) {
	msg, err := resp.ToMessage()
	if err != nil {
		return decision{}, err
	}
	if sr, ok := p.alg.redis.(shortReplier); ok && msg.IsInt64() {
		// The kind's short reply to an allowing call (<kind>.short,
		// see allow.lua): count alone; retry is 0, reset the kind's.
		count, _ := msg.AsInt64()
		d := decision{allowed: true, count: count, reset: sr.shortReset(*p, now)}
		d.unmark()
		return d, nil
	}
	arr, err := msg.ToArray()
	if err != nil {
		return decision{}, err
	}
	windowed := p.alg.redis.windowed()
	width := len(arr) - b2i(windowed)
	if width != 4 && (width != 9 || !p.penalize) {
		return decision{}, errors.New("unexpected script reply")
	}
	d, err := parseDecision(arr[:width])
	if err == nil && windowed {
		d.win, err = arr[width].AsInt64()
	}
	return d, err
}

// shortReplier is a kind whose script answers an allowing call with its
// count alone (its <kind>.short piece, see lua/allow.lua), because Go knows
// the call's reset from the plan and the call's time (now: the clock's
// reading, or the process clock's when the script reads Redis' TIME and
// the reset does not depend on it). It takes the plan by value, as the
// other kinds' methods do: a pointer through an interface would move the
// call's plan to the heap.
type shortReplier interface {
	shortReset(p plan, now int64) int64
}

// ttl is the expiry, in ms, of a key that must last us µs: lua/ttl.lua's
// formula (rounded up to a whole ms, plus a second), for the expiries a
// script takes as an argument.
func ttl(us int64) int64 { return (us+999)/1000 + 1000 }

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
	d := decision{
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
	}
	d.unmark()
	return d, nil
}

// unmark reads the mark of a give-back off a reply's count: a script
// answers -1 - count for a count a give-back took from (see
// lua/decide.lua's decide.given).
func (d *decision) unmark() {
	if d.count < 0 {
		d.count, d.given = -1-d.count, true
	}
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
	cause failure
	err   error
}

func (e *callError) Error() string { return e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// unavailableCodes are error replies that mean the server cannot serve now
// rather than that the request was wrong.
var unavailableCodes = []string{
	"LOADING", "BUSY", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"OOM", "MISCONF", "NOREPLICAS", "NOAUTH", "NOPERM", "WRONGPASS",
}

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
		return &callError{cause: callerGone, err: ctx.Err()}
	}
	if re, ok := rueidis.IsRedisErr(err); ok && !hasCode(unavailableCodes, replyCode(re.Error())) {
		return &callError{cause: misuse, err: err}
	}
	return &callError{cause: outage, err: err}
}

// refusal returns the log line for an error reply that means
// misconfiguration, which must be loud, saying what Redis refused: the
// credentials for WRONGPASS and NOAUTH (a wrong password, or none), the
// permission to run the limiter's commands for NOPERM (the user is in, but
// its ACL does not allow the scripts). ok is false for any other error.
func refusal(err error) (msg string, ok bool) {
	re, ok := rueidis.IsRedisErr(err)
	if !ok {
		return "", false
	}
	switch replyCode(re.Error()) {
	case "WRONGPASS", "NOAUTH":
		return "ratelimit: redis refused the credentials; deciding locally", true
	case "NOPERM":
		return "ratelimit: redis refused the permission for the limiter's commands (ACL); deciding locally", true
	}
	return "", false
}
