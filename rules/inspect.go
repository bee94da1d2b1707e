package rules

import (
	"context"
	"encoding/json"
	"html/template"
	"net/http"
	"reflect"
	"strings"
	"time"

	_ "embed"

	"github.com/ratelimit-go/ratelimit"
)

// Handler returns an http.Handler that shows operators, as HTML or as
// JSON, the rules w has in force and where they came from (the file, the
// last reload, the last error), the Stats of lim (whether it is connected
// to Redis at all, as a Dial that cannot reach Redis yet is not, the
// breakers open, whether Redis is in use, the fleet's instance count, the
// write-back queue), and, when asked with ?rule=NAME&key=KEY, that key's state under
// that rule (from [ratelimit.Limiter.Peek]: what is left, when the window
// empties, the violations, a ban). lim may be nil: the page then shows the
// rules only.
//
// The page rounds the durations of a key's state as a person reads them
// (to the millisecond below a second, to a tenth of a second below a
// minute, to the second above); the JSON has them exact. A key with no
// state at all, never seen or expired, is said to have none, since a
// mistyped key looks like an idle one otherwise.
//
// It answers GET and HEAD only, and changes nothing: Peek records no event
// and counts no violation. It answers JSON for ?format=json, or for a
// request that accepts application/json and not text/html; HTML otherwise.
// Mount it on a mux of your own, behind your own authentication (it shows
// your limits, and any key's state): it never registers itself anywhere,
// http.DefaultServeMux included.
func Handler(w *Watcher, lim *ratelimit.Limiter) http.Handler {
	return &inspector{w: w, lim: lim}
}

// inspector is the handler Handler returns.
type inspector struct {
	w   *Watcher
	lim *ratelimit.Limiter
}

// peekTimeout bounds the Peek of a key's state.
const peekTimeout = 2 * time.Second

//go:embed inspect.html
var pageSource string

var page = template.Must(template.New("page").Funcs(template.FuncMap{"human": human}).Parse(pageSource))

// human rounds a duration (as Duration.String writes it) as a person reads
// it: to the microsecond below a millisecond, so that it never reads 0
// when it is not, to the millisecond below a second, to a tenth of a
// second below a minute, and to the second above: "4m47.639045s" is
// "4m48s". Anything else is returned as it is.
func human(s string) string {
	d, err := time.ParseDuration(s)
	if err != nil {
		return s
	}
	switch a := d.Abs(); {
	case a < time.Millisecond:
		d = d.Round(time.Microsecond)
	case a < time.Second:
		d = d.Round(time.Millisecond)
	case a < time.Minute:
		d = d.Round(100 * time.Millisecond)
	default:
		d = d.Round(time.Second)
	}
	return d.String()
}

// report is what the handler shows. Its JSON names follow the rules
// file's.
type report struct {
	Source sourceView  `json:"source"`
	Rules  []ruleView  `json:"rules"`
	Stats  *statsView  `json:"stats,omitempty"`
	Query  *queryView  `json:"query,omitempty"`
	Now    time.Time   `json:"now"`
	Names  []string    `json:"-"` // for the page's form
	Extra  []statField `json:"-"`
}

type sourceView struct {
	Path    string     `json:"path"`
	Loaded  time.Time  `json:"loaded"`
	Reloads int        `json:"reloads"`
	Error   string     `json:"error,omitempty"`
	ErrorAt *time.Time `json:"error_at,omitempty"`
}

type ruleView struct {
	Name      string         `json:"name"`
	Kind      string         `json:"kind"`
	Rate      int            `json:"rate"`
	Window    string         `json:"window,omitempty"`
	Burst     int            `json:"burst,omitempty"`
	Period    string         `json:"period,omitempty"`
	Location  string         `json:"location,omitempty"`
	DryRun    bool           `json:"dry_run"`
	Degraded  string         `json:"degraded,omitempty"`
	Prefetch  string         `json:"prefetch,omitempty"`
	Penalty   *penaltyView   `json:"penalty,omitempty"`
	Overrides []overrideView `json:"overrides,omitempty"`
	Line      int            `json:"line"`
}

type penaltyView struct {
	WarnAfter int     `json:"warn_after,omitempty"`
	BanAfter  int     `json:"ban_after"`
	BanFor    string  `json:"ban_for"`
	Memory    string  `json:"memory,omitempty"`
	BanGrowth float64 `json:"ban_growth,omitempty"`
	MaxBanFor string  `json:"max_ban_for,omitempty"`
}

type overrideView struct {
	Key    string `json:"key"`
	Rate   int    `json:"rate"`
	Window string `json:"window,omitempty"`
	Burst  int    `json:"burst,omitempty"`
}

type statsView struct {
	RedisInUse       bool            `json:"redis_in_use"`
	Connected        bool            `json:"connected"`
	BreakersOpen     int             `json:"breakers_open"`
	Instances        int             `json:"instances"`
	WriteBackPending int             `json:"write_back_pending"`
	All              ratelimit.Stats `json:"all"`
}

// statField is one field of ratelimit.Stats, for the page's full table.
type statField struct {
	Name  string
	Value any
}

type queryView struct {
	Rule     string    `json:"rule"`
	Key      string    `json:"key"`
	Override bool      `json:"override"`
	Limit    string    `json:"limit,omitempty"`
	Error    string    `json:"error,omitempty"`
	State    *keyState `json:"state,omitempty"`
}

type keyState struct {
	// NoState reports a key with no state at all: nothing counted, no
	// violation, no ban; never seen, or its state expired.
	NoState    bool   `json:"no_state"`
	WouldAllow bool   `json:"would_allow"`
	Quota      int    `json:"quota"`
	Remaining  int    `json:"remaining"`
	RetryAfter string `json:"retry_after"`
	ResetAfter string `json:"reset_after"`
	Violations int    `json:"violations"`
	Warned     bool   `json:"warned"`
	Banned     bool   `json:"banned"`
	BannedFor  string `json:"banned_for"`
	Degraded   bool   `json:"degraded"`
}

func (h *inspector) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		rw.Header().Set("Allow", "GET, HEAD")
		http.Error(rw, "read-only: GET or HEAD", http.StatusMethodNotAllowed)
		return
	}
	asJSON, ok := wantsJSON(r)
	if !ok {
		http.Error(rw, "format: json or html", http.StatusBadRequest)
		return
	}
	rep := h.report(r.Context(), r.URL.Query().Get("rule"), r.URL.Query().Get("key"), r.URL.Query().Has("rule") || r.URL.Query().Has("key"))
	rw.Header().Set("Cache-Control", "no-store")
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	if asJSON {
		rw.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(rw)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
		return
	}
	rw.Header().Set("Content-Type", "text/html; charset=utf-8")
	rw.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'")
	page.Execute(rw, rep)
}

// wantsJSON reports whether r asks for JSON, and false for ok when it asks
// for a format the handler has not.
func wantsJSON(r *http.Request) (asJSON, ok bool) {
	switch r.URL.Query().Get("format") {
	case "json":
		return true, true
	case "html":
		return false, true
	case "":
		accept := r.Header.Get("Accept")
		return strings.Contains(accept, "application/json") && !strings.Contains(accept, "text/html"), true
	}
	return false, false
}

// report gathers what the handler shows; asked says whether a key's state
// was asked for.
func (h *inspector) report(ctx context.Context, rule, key string, asked bool) *report {
	set, st := h.w.Current(), h.w.Status()
	rep := &report{Now: time.Now(), Names: set.Names()}
	rep.Source = sourceView{Path: st.Path, Loaded: st.Loaded, Reloads: st.Reloads}
	if st.Err != nil {
		at := st.ErrAt
		rep.Source.Error, rep.Source.ErrorAt = st.Err.Error(), &at
	}
	for _, name := range set.names {
		rep.Rules = append(rep.Rules, view(set.rules[name]))
	}
	if h.lim != nil {
		s := h.lim.Stats()
		rep.Stats = &statsView{RedisInUse: s.RedisInUse, Connected: s.Connected, BreakersOpen: s.BreakersOpen,
			Instances: s.Instances, WriteBackPending: s.WriteBackPending, All: s}
		v := reflect.ValueOf(s)
		for i := range v.NumField() {
			rep.Extra = append(rep.Extra, statField{Name: v.Type().Field(i).Name, Value: v.Field(i).Interface()})
		}
	}
	if asked {
		rep.Query = h.query(ctx, set, rule, key)
	}
	return rep
}

// query answers ?rule=&key=: the key's state under the rule, with its
// override when it has one.
func (h *inspector) query(ctx context.Context, set *Set, name, key string) *queryView {
	q := &queryView{Rule: name, Key: key}
	rule, ok := set.For(name, key)
	switch {
	case !ok:
		q.Error = "no rule of that name in force"
		return q
	case key == "":
		q.Error = "a key is required"
		return q
	case h.lim == nil:
		q.Error = "no Limiter to ask"
		return q
	}
	_, q.Override = set.rules[name].overrides[key]
	q.Limit = rule.Limit.String()
	ctx, cancel := context.WithTimeout(ctx, peekTimeout)
	defer cancel()
	res, err := h.lim.Peek(ctx, rule, key)
	if err != nil {
		q.Error = err.Error()
		return q
	}
	q.State = &keyState{NoState: res.Remaining == res.Limit && res.ResetAfter == 0 && res.Violations == 0 && !res.Banned,
		WouldAllow: res.Allowed, Quota: res.Limit, Remaining: res.Remaining,
		RetryAfter: res.RetryAfter.String(), ResetAfter: res.ResetAfter.String(), Violations: res.Violations,
		Warned: res.Warned, Banned: res.Banned, BannedFor: res.BannedFor.String(), Degraded: res.Degraded}
	return q
}

// view returns a rule as the report shows it: as the file writes it.
func view(e *entry) ruleView {
	r := e.rule
	v := ruleView{Name: r.Name, Kind: e.kind, Rate: r.Limit.Rate, Burst: r.Limit.Burst, DryRun: r.DryRun, Line: e.line}
	if r.Limit.Window != 0 {
		v.Window = r.Limit.Window.String()
	}
	if r.Limit.Period != 0 {
		v.Period = r.Limit.Period.String()
		v.Location = "UTC"
		if r.Limit.Location != nil {
			v.Location = r.Limit.Location.String()
		}
	}
	if r.Degraded != ratelimit.DegradedDefault {
		v.Degraded = r.Degraded.String()
	}
	if r.Prefetch != 0 {
		v.Prefetch = r.Prefetch.String()
	}
	if p := r.Penalty; p != nil {
		v.Penalty = &penaltyView{WarnAfter: p.WarnAfter, BanAfter: p.BanAfter, BanFor: p.BanFor.String(),
			BanGrowth: p.BanGrowth}
		if p.Memory != 0 {
			v.Penalty.Memory = p.Memory.String()
		}
		if p.MaxBanFor != 0 {
			v.Penalty.MaxBanFor = p.MaxBanFor.String()
		}
	}
	for _, key := range e.keys {
		o := e.overrides[key]
		ov := overrideView{Key: key, Rate: o.Limit.Rate, Burst: o.Limit.Burst}
		if o.Limit.Window != 0 {
			ov.Window = o.Limit.Window.String()
		}
		v.Overrides = append(v.Overrides, ov)
	}
	return v
}
